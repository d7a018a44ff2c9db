package ratelimit

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"
)

// clientKey holds, in an admitted call's context, the client its message is charged to.
type clientKey struct{}

// Tap is the gRPC server's door (grpc.InTapHandle): it runs when a call's headers arrive,
// before its message is read, and refuses a client in debt. clientOf names the client from
// the context, which holds the peer and the headers.
func (l *Limiter) Tap(clientOf func(context.Context) string) tap.ServerInHandle {
	return func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		client := clientOf(ctx)
		if wait, ok := l.Admit(client); !ok {
			return nil, l.Status(client, l.DelayRefusal(ctx, client, wait)).Err()
		}
		return context.WithValue(ctx, clientKey{}, client), nil
	}
}

// Status is the RESOURCE_EXHAUSTED status of a refusal, with a RetryInfo detail (the
// standard retry hint gRPC clients read).
func (l *Limiter) Status(client string, wait time.Duration) *status.Status {
	st := status.New(codes.ResourceExhausted, l.Refusal(client, wait))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st
}

// StatsHandler charges each message a call admitted by Tap receives, once it is read
// (grpc.StatsHandler). Calls the door did not see (the in-process server of the REST
// gateway, which HTTP admits) are not charged here.
func (l *Limiter) StatsHandler() stats.Handler { return statsHandler{l} }

type statsHandler struct{ l *Limiter }

func (h statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.InPayload); ok {
		if client, ok := ctx.Value(clientKey{}).(string); ok {
			// The decoded size: what decoding it cost, compressed or not.
			h.l.ChargeBytes(client, max(p.Length, p.WireLength))
		}
	}
}

func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (statsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (statsHandler) HandleConn(context.Context, stats.ConnStats)                       {}
