// Command flood is a misbehaving client for the registry's fairness benchmark: it sends one
// PutExport, encoded once, as fast as it can from a local address of its own, on several
// connections with several calls in flight on each, until SIGTERM; then it prints what it
// sent and how each call ended, as JSON, and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Result is what the flood printed.
type Result struct {
	Seconds float64
	Sent    int64
	// Codes counts the calls by how they ended (a gRPC code's name).
	Codes map[string]int64
}

func main() {
	target := flag.String("target", "", "host:port of the gRPC listener")
	from := flag.String("from", "127.0.0.2", "local IP address to send from")
	cluster := flag.String("cluster", "flood", "cluster id of the writes (clusterset prod)")
	size := flag.Int("bytes", 200<<10, "bytes of the exported annotation that makes each write large")
	conns := flag.Int("connections", 4, "connections")
	inflight := flag.Int("inflight", 4, "calls in flight on each connection")
	flag.Parse()
	if err := run(*target, *from, *cluster, *size, *conns, *inflight); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func run(target, from, cluster string, size, conns, inflight int) error {
	req, err := proto.Marshal(&registryv1.PutExportRequest{
		Clusterset: "prod", ClusterId: cluster, Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "flood"},
		Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
			Ports:               []*registryv1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}},
			ExportedAnnotations: map[string]string{"example.com/blob": strings.Repeat("x", size)}},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	var sent atomic.Int64
	var mu sync.Mutex
	byCode := map[string]int64{}
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			return err
		}
		defer cc.Close()
		for range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := map[codes.Code]int64{}
				for ctx.Err() == nil {
					var out emptypb.Empty
					err := cc.Invoke(ctx, "/globaldiscoverymcs.registry.v1.RegistryService/PutExport", raw(req), &out, grpc.ForceCodecV2(rawCodec{}))
					if ctx.Err() != nil {
						break
					}
					sent.Add(1)
					local[status.Code(err)]++
				}
				mu.Lock()
				for c, n := range local {
					byCode[c.String()] += n
				}
				mu.Unlock()
			}()
		}
	}
	<-ctx.Done()
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(Result{Seconds: time.Since(start).Seconds(), Sent: sent.Load(), Codes: byCode})
}

// raw is a request sent as the bytes it holds.
type raw []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(raw))}, nil
}

// Unmarshal ignores the answer: the flood counts how calls end, not what they return.
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

func (rawCodec) Name() string { return "proto" }
