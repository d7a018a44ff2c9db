package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
)

// Decoding answers a request that is not a valid message (bad wire format, a string that
// is not UTF-8) with INVALID_ARGUMENT. grpc-go reports such a request as INTERNAL, and
// writes that status itself before a handler could change it, which would blame the
// server for the client's bytes. So the server codec does not fail on the registry's own
// messages: it records the error, and the service's handlers, wrapped by ServiceDesc, turn
// it into INVALID_ARGUMENT.
type Decoding struct {
	base encoding.CodecV2
	bad  sync.Map // request message -> its decoding error
}

// NewDecoding returns the codec and descriptor pair; install both.
func NewDecoding() *Decoding { return &Decoding{base: encoding.GetCodecV2(encproto.Name)} }

// Codec is the server codec (grpc.ForceServerCodecV2).
func (d *Decoding) Codec() encoding.CodecV2 { return codec{d} }

type codec struct{ d *Decoding }

// Marshal encodes a message; a shared watch message is encoded once for all its streams
// (a SliceBuffer is never returned to a pool, so the bytes can go out on many streams).
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*imports.Message); ok {
		b, err := m.EncodedProto()
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.d.base.Marshal(v)
}

func (c codec) Name() string { return c.d.base.Name() }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(proto.Message); ok && ours(v) {
		// Counted before decoding: a request of many tiny elements is refused for what it
		// would cost, not after it cost it.
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		err := checkDecodeCost(m.ProtoReflect().Descriptor(), buf.ReadOnlyData())
		buf.Free()
		if err != nil {
			c.d.bad.Store(v, err)
			return nil
		}
	}
	err := c.d.base.Unmarshal(data, v)
	if err != nil && ours(v) {
		c.d.bad.Store(v, err)
		return nil
	}
	return err
}

// ours reports a message of the registry's API, whose handlers ServiceDesc wraps.
func ours(v any) bool {
	m, ok := v.(proto.Message)
	return ok && strings.HasPrefix(string(m.ProtoReflect().Descriptor().FullName()), "globaldiscoverymcs.registry.")
}

func (d *Decoding) check(v any, err error) error {
	if bad, ok := d.bad.LoadAndDelete(v); ok {
		if _, isStatus := status.FromError(bad.(error)); isStatus {
			return bad.(error)
		}
		return status.Errorf(codes.InvalidArgument, "the request is not a valid protobuf message: %v", bad)
	}
	return err
}

// ServiceDesc is the registry service's descriptor, its handlers answering undecodable
// requests with INVALID_ARGUMENT.
func (d *Decoding) ServiceDesc() *grpc.ServiceDesc {
	desc := registryv1.RegistryService_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i := range desc.Methods {
		h := desc.Methods[i].Handler
		desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return d.check(v, dec(v)) }, ic)
		}
	}
	desc.Streams = append([]grpc.StreamDesc(nil), desc.Streams...)
	for i := range desc.Streams {
		h := desc.Streams[i].Handler
		desc.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, decodingStream{ss, d}) }
	}
	return &desc
}

type decodingStream struct {
	grpc.ServerStream
	d *Decoding
}

func (s decodingStream) RecvMsg(m any) error { return s.d.check(m, s.ServerStream.RecvMsg(m)) }
