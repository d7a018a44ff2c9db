package server

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

type unimplemented struct {
	registryv1.UnimplementedRegistryServiceServer
}

// TestServiceDescDecodeErrors: bytes that are not a valid request are INVALID_ARGUMENT.
func TestServiceDescDecodeErrors(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	d := NewDecoding()
	s := grpc.NewServer(grpc.ForceServerCodecV2(d.Codec()))
	s.RegisterService(d.ServiceDesc(), unimplemented{})
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	conn, err := grpc.NewClient("passthrough:///buf", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, raw := range map[string][]byte{"truncated": {0x0a, 0x05, 'a'}, "invalid UTF-8": {0x0a, 0x02, 0xff, 0xfe}} {
		var out emptypb.Empty
		err := conn.Invoke(context.Background(), "/globaldiscoverymcs.registry.v1.RegistryService/RenewLease", rawMessage(raw), &out, grpc.ForceCodecV2(rawCodec{}))
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "not a valid protobuf message") {
			t.Errorf("%s: %s %q", name, st.Code(), st.Message())
		}
		// The server-streaming WatchImports too.
		cs, err := conn.NewStream(context.Background(), &registryv1.RegistryService_ServiceDesc.Streams[0],
			"/globaldiscoverymcs.registry.v1.RegistryService/WatchImports", grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(rawMessage(raw)); err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		err = cs.RecvMsg(&out)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "not a valid protobuf message") {
			t.Errorf("%s watch: %s %q", name, st.Code(), st.Message())
		}
	}
	// A valid request reaches the handler.
	var out registryv1.RenewLeaseResponse
	err = conn.Invoke(context.Background(), "/globaldiscoverymcs.registry.v1.RegistryService/RenewLease", &registryv1.RenewLeaseRequest{Clusterset: "a"}, &out)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("valid request: %v, want the handler's UNIMPLEMENTED", err)
	}
}
