package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/authz"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/server"
)

// perCallConn gives every REST call its own in-process gRPC connection, so that whatever
// one call does to its connection (an oversized frame, a reset) ends that call alone and
// never another client's call or watch.
type perCallConn struct {
	lis  *inProcessListener
	opts []grpc.DialOption
}

func newPerCallConn(lis *inProcessListener, maxRequestBytes int) *perCallConn {
	return &perCallConn{lis: lis, opts: []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// As the gRPC listener: requests up to --max-request-bytes, answers up to what the
		// largest clusterset needs.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxAnswerBytes), grpc.MaxCallSendMsgSize(maxRequestBytes)),
	}}
}

// maxAnswerBytes bounds one answer of the registry (a ListImports of a large clusterset).
const maxAnswerBytes = 256 << 20

var _ grpc.ClientConnInterface = (*perCallConn)(nil)

func (p *perCallConn) dial() (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient("passthrough:///registry", p.opts...)
	if err != nil {
		return nil, fmt.Errorf("in-process connection: %w", err)
	}
	return cc, nil
}

// Invoke implements grpc.ClientConnInterface.
func (p *perCallConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cc, err := p.dial()
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer func() { _ = cc.Close() }()
	return cc.Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface. The API's one stream, WatchImports, is
// served over REST by restWatch, in process; no REST path opens a gRPC stream.
func (p *perCallConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "REST streams are served in process")
}

// watchMethod is the full gRPC name of WatchImports.
const watchMethod = "/globaldiscoverymcs.registry.v1.RegistryService/WatchImports"

// restWatch serves WatchImports over REST by running the service's stream handler in
// process, through the same interceptors as a gRPC call, and writing each message as one
// line of JSON. Each message is encoded once and written with a deadline (--send-timeout),
// so a client that stops reading holds one encoded message for at most that long; the
// generic gateway path held several copies of each message and never gave up.
type restWatch struct {
	svc         registryv1.RegistryServiceServer
	intercept   grpc.StreamServerInterceptor
	identity    func(*http.Request) string
	sendTimeout time.Duration
	marshal     protojson.MarshalOptions
}

var watchQuery = utilities.NewDoubleArray([][]string{{"clusterset"}})

func (rw *restWatch) serve(w http.ResponseWriter, r *http.Request, params map[string]string) {
	req := &registryv1.WatchImportsRequest{Clusterset: params["clusterset"]}
	ss := &restStream{w: w, rc: http.NewResponseController(w), watch: rw}
	if err := r.ParseForm(); err != nil {
		ss.fail(status.Errorf(codes.InvalidArgument, "query: %v", err))
		return
	}
	if err := runtime.PopulateQueryParameters(req, r.Form, watchQuery); err != nil {
		ss.fail(status.Errorf(codes.InvalidArgument, "query: %v", err))
		return
	}
	md := metadata.MD{}
	if rw.identity != nil {
		if id := rw.identity(r); id != "" {
			md.Set(authz.IdentityHeader, id)
		}
	}
	ctx := metadata.NewIncomingContext(r.Context(), md)
	addr, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	ss.ctx = server.WithTimedSends(peer.NewContext(ctx, &peer.Peer{Addr: addr}))
	ss.req = req
	info := &grpc.StreamServerInfo{FullMethod: watchMethod, IsServerStream: true}
	handler := func(srv any, stream grpc.ServerStream) error {
		in := new(registryv1.WatchImportsRequest)
		if err := stream.RecvMsg(in); err != nil {
			return err
		}
		return srv.(registryv1.RegistryServiceServer).WatchImports(in, &grpc.GenericServerStream[registryv1.WatchImportsRequest, registryv1.WatchImportsResponse]{ServerStream: stream})
	}
	if err := rw.intercept(rw.svc, ss, info, handler); err != nil && ss.ctx.Err() == nil {
		ss.fail(err)
	}
}

// restStream is the grpc.ServerStream of a REST watch.
type restStream struct {
	ctx   context.Context
	req   *registryv1.WatchImportsRequest
	w     http.ResponseWriter
	rc    *http.ResponseController
	watch *restWatch
	wrote bool
}

func (s *restStream) Context() context.Context     { return s.ctx }
func (s *restStream) SetHeader(metadata.MD) error  { return nil }
func (s *restStream) SendHeader(metadata.MD) error { return nil }
func (s *restStream) SetTrailer(metadata.MD)       {}

// RecvMsg hands the handler the request, once.
func (s *restStream) RecvMsg(m any) error {
	if s.req == nil {
		return errors.New("the request was already received")
	}
	proto.Merge(m.(proto.Message), s.req)
	s.req = nil
	return nil
}

// SendMsg writes one message as {"result":...}, the gateway's stream format. A shared
// watch message is encoded once for every REST watch it goes to.
func (s *restStream) SendMsg(m any) error {
	var b []byte
	var err error
	if msg, ok := m.(*imports.Message); ok {
		b, err = msg.EncodedJSON(s.watch.marshal)
	} else {
		b, err = s.watch.marshal.Marshal(m.(proto.Message))
	}
	if err != nil {
		return status.Errorf(codes.Internal, "encode a watch message: %v", err)
	}
	return s.writeLine("result", b, http.StatusOK)
}

// fail writes the error as {"error":{"code","message","details"}}: with the HTTP status of
// its code when nothing was written yet, else as the stream's last line.
func (s *restStream) fail(err error) {
	st := status.Convert(err)
	b, merr := s.watch.marshal.Marshal(st.Proto())
	if merr != nil {
		return
	}
	_ = s.writeLine("error", b, runtime.HTTPStatusFromCode(st.Code()))
}

func (s *restStream) writeLine(field string, msg []byte, code int) error {
	if s.watch.sendTimeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.watch.sendTimeout))
	}
	if !s.wrote {
		s.wrote = true
		s.w.Header().Set("Content-Type", "application/json")
		s.w.WriteHeader(code)
	}
	// Written in pieces, so a large message is held once (as encoded), not copied into a
	// line; compacted on the way, as unary answers are.
	_, err := io.WriteString(s.w, `{"`+field+`":`)
	if err == nil {
		err = writeCompact(s.w, msg)
	}
	if err == nil {
		_, err = io.WriteString(s.w, "}\n")
	}
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		return status.Errorf(codes.ResourceExhausted, "watch closed: the REST client did not take a message within %s (--send-timeout): %v", s.watch.sendTimeout, err)
	}
	return nil
}

// chainStream composes stream interceptors as grpc.ChainStreamInterceptor does.
func chainStream(ints []grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		h := handler
		for i := len(ints) - 1; i >= 0; i-- {
			next, in := h, ints[i]
			h = func(srv any, ss grpc.ServerStream) error { return in(srv, ss, info, next) }
		}
		return h(srv, ss)
	}
}

// writeDeadline gives a unary REST answer --send-timeout to be written: a client that
// stops reading cannot hold its answer for longer.
func writeDeadline(next http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
		next.ServeHTTP(w, r)
	})
}

// writeCompact writes JSON without the whitespace between tokens (protojson varies it on
// purpose from build to build), in chunks, without copying the whole document.
func writeCompact(w io.Writer, doc []byte) error {
	var chunk [32 << 10]byte
	n := 0
	err := scanJSON(doc, func(c byte, quoted bool) error {
		if !quoted && (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
			return nil
		}
		chunk[n] = c
		if n++; n == len(chunk) {
			n = 0
			_, err := w.Write(chunk[:])
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = w.Write(chunk[:n])
	return err
}

// scanJSON calls fn with each byte of a JSON document and whether it is part of a string
// (its quotes included), stopping at fn's first error.
func scanJSON(doc []byte, fn func(c byte, quoted bool) error) error {
	inString, escaped := false, false
	for _, c := range doc {
		quoted := inString || c == '"'
		switch {
		case !inString:
			inString = c == '"'
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inString = false
		}
		if err := fn(c, quoted); err != nil {
			return err
		}
	}
	return nil
}
