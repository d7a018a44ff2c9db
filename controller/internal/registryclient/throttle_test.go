package registryclient

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// leaseServer answers RenewLease.
type leaseServer struct {
	registryv1.UnimplementedRegistryServiceServer
}

func (leaseServer) RenewLease(context.Context, *registryv1.RenewLeaseRequest) (*registryv1.RenewLeaseResponse, error) {
	return &registryv1.RenewLeaseResponse{}, nil
}

// doorServer serves a registry whose door refuses the first `refuse` calls with refusal.
func doorServer(t *testing.T, refuse int32, refusal *status.Status) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	srv := grpc.NewServer(grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		if calls.Add(1) <= refuse {
			return nil, refusal.Err()
		}
		return ctx, nil
	}))
	registryv1.RegisterRegistryServiceServer(srv, leaseServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "http://" + lis.Addr().String(), calls
}

func throttled(t *testing.T, after time.Duration) *status.Status {
	t.Helper()
	st, err := status.New(codes.ResourceExhausted, "over its share (--client-rate)").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func renew(t *testing.T, urls ...string) (time.Duration, error) {
	t.Helper()
	targets, err := ParseURLs(urls, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolOptions{Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	err = p.Call(context.Background(), func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		_, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{})
		return err
	})
	return time.Since(start), err
}

func TestCallsHonourRetryHints(t *testing.T) {
	t.Run("waits the hint and calls the same URL again", func(t *testing.T) {
		url, calls := doorServer(t, 2, throttled(t, 300*time.Millisecond))
		took, err := renew(t, url)
		if err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 3 || took < 600*time.Millisecond {
			t.Fatalf("%d calls in %s; want 3 calls, after two waits of 300ms", calls.Load(), took)
		}
	})
	t.Run("a hint longer than the wait allowed moves to the next URL", func(t *testing.T) {
		busy, busyCalls := doorServer(t, 1000, throttled(t, time.Minute))
		other, otherCalls := doorServer(t, 0, nil)
		took, err := renew(t, busy, other)
		if err != nil {
			t.Fatal(err)
		}
		if busyCalls.Load() != 1 || otherCalls.Load() != 1 || took > 10*time.Second {
			t.Fatalf("%d calls to the busy URL, %d to the next, in %s", busyCalls.Load(), otherCalls.Load(), took)
		}
	})
	t.Run("a quota refusal is not retried on the same URL", func(t *testing.T) {
		url, calls := doorServer(t, 1000, status.New(codes.ResourceExhausted, "1001 exports, at most 1000 per cluster (--max-exports-per-cluster)"))
		_, err := renew(t, url)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("err %v", err)
		}
		if _, ok := RetryDelay(err); ok || calls.Load() != 1 {
			t.Fatalf("%d calls; a refusal without a hint was retried", calls.Load())
		}
	})
}
