package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// serve runs the service on an in-memory listener with the memory store, as the registry
// wires it (the decoding codec included, the store enforcing the quotas), and returns a
// client.
func serve(t testing.TB, opts Options, quota ...store.Quota) registryv1.RegistryServiceClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var q store.Quota
	if len(quota) > 0 {
		q = quota[0]
	}
	st := memory.New(memory.WithQuota(q))
	cache := imports.New(imports.Options{Store: st})
	go func() { _ = cache.Run(ctx) }()
	opts.Store, opts.Cache = st, cache
	svc := New(opts)
	decoding := NewDecoding()
	srv := grpc.NewServer(grpc.ForceServerCodecV2(decoding.Codec()))
	srv.RegisterService(decoding.ServiceDesc(), svc)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return registryv1.NewRegistryServiceClient(conn)
}

func register(t *testing.T, c registryv1.RegistryServiceClient, id string) {
	t.Helper()
	if _, err := c.RegisterCluster(context.Background(), &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, Region: "r", LeaseDuration: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
}

func export(name string, port int32, addrs ...string) *registryv1.PutExportRequest {
	var eps []*registryv1.Endpoint
	for _, a := range addrs {
		eps = append(eps, &registryv1.Endpoint{Addresses: []string{a}})
	}
	return &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name},
		Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: port, Protocol: "TCP"}}},
		EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: eps}}}
}

// TestWriteReadWatch: an export becomes an import that a list shows and a watch receives,
// first in its snapshot, then as a delta.
func TestWriteReadWatch(t *testing.T) {
	c := serve(t, Options{})
	ctx := context.Background()
	register(t, c, "a")
	if _, err := c.PutExport(ctx, export("one", 80, "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod"})
	if err != nil || len(list.GetImports()) != 1 || list.GetImports()[0].GetService().GetName() != "one" {
		t.Fatalf("ListImports = %v, %v", list, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := c.WatchImports(wctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := w.Recv()
	if err != nil || !snap.GetSnapshot() || len(snap.GetUpserts()) != 1 {
		t.Fatalf("first watch message = %v, %v; want a snapshot of one import", snap, err)
	}
	if _, err := c.PutExport(ctx, export("two", 80, "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	delta, err := w.Recv()
	if err != nil || delta.GetSnapshot() || len(delta.GetUpserts()) != 1 || delta.GetUpserts()[0].GetService().GetName() != "two" || delta.GetRevision() <= snap.GetRevision() {
		t.Fatalf("second watch message = %v, %v; want a delta with import two", delta, err)
	}
}

// TestRefusals: bad input names the field and changes nothing stored; a cluster past its
// quota is refused with the flag's name and the refusal is counted.
func TestRefusals(t *testing.T) {
	var refused []string
	c := serve(t, Options{Refused: func(l string) { refused = append(refused, l) }}, store.Quota{Exports: 1, Endpoints: 2})
	ctx := context.Background()
	register(t, c, "a")
	if _, err := c.PutExport(ctx, export("one", 80, "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *registryv1.PutExportRequest
		code codes.Code
		want string
	}{
		{"bad port", export("one", 70000, "10.0.0.1"), codes.InvalidArgument, "spec.ports[0].port"},
		{"bad name", export("Not_A_Name", 80, "10.0.0.1"), codes.InvalidArgument, "service.name"},
		{"a second export", export("two", 80, "10.0.0.2"), codes.ResourceExhausted, "--max-exports-per-cluster"},
		{"too many endpoints", export("one", 80, "10.0.0.1", "10.0.0.2", "10.0.0.3"), codes.ResourceExhausted, "--max-endpoints-per-cluster"},
	} {
		_, err := c.PutExport(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %s naming %q", tc.name, err, tc.code, tc.want)
		}
	}
	list, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil || len(list.GetImports()) != 1 || list.GetImports()[0].GetSpec().GetPorts()[0].GetPort() != 80 {
		t.Fatalf("after the refusals: %v, %v; want the one export as it was", list, err)
	}
	if strings.Join(refused, ",") != LimitExportsPerCluster+","+LimitEndpointsPerCluster {
		t.Errorf("refusals counted: %v", refused)
	}
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "nobody", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "x"},
		Spec: export("x", 80).GetSpec()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("an export of an unregistered cluster: %v, want FAILED_PRECONDITION", err)
	}
}

// TestWatchDeltasAndPages: over the wire, a watch with cluster_deltas and pages gets its
// snapshot in pages and then per-cluster deltas; a page size out of range is refused with
// the field and its range.
func TestWatchDeltasAndPages(t *testing.T) {
	c := serve(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	register(t, c, "a")
	for _, name := range []string{"one", "two", "three"} {
		if _, err := c.PutExport(ctx, export(name, 80, "10.0.0.1")); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int32{-1, 10001} {
		w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", SnapshotPageSize: n})
		if err == nil {
			_, err = w.Recv()
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "snapshot_page_size") || !strings.Contains(err.Error(), "10000") {
			t.Errorf("page size %d: %v; want INVALID_ARGUMENT naming snapshot_page_size and its limit", n, err)
		}
	}
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true, ClusterDeltas: true, SnapshotPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for {
		m, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.GetSnapshot(), m.GetSnapshotContinues())
		if !m.GetSnapshotContinues() {
			break
		}
	}
	if fmt.Sprint(got) != "[true true false false]" {
		t.Fatalf("snapshot pages (snapshot, continues): %v; want two pages", got)
	}
	if _, err := c.PutExport(ctx, export("two", 80, "10.0.0.9")); err != nil {
		t.Fatal(err)
	}
	m, err := w.Recv()
	if err != nil || len(m.GetUpserts()) != 0 || len(m.GetDeltas()) != 1 {
		t.Fatalf("after a write: %v, %v; want one delta", m, err)
	}
	d := m.GetDeltas()[0]
	if d.GetHeader() != nil || len(d.GetClusters()) != 1 || d.GetClusters()[0].GetEndpointGroups()[0].GetEndpoints()[0].GetAddresses()[0] != "10.0.0.9" {
		t.Fatalf("delta %v; want cluster a's new endpoint and no header", d)
	}
}

// TestWritesFollowTheImportsLeaseRule: a write is taken exactly while the imports count
// the cluster's lease (the one rule, lease.Judge through the cache): at its expiry by the
// cache's clock, PutExport, DeleteExport and SyncExports are refused with "register
// again"; a cluster whose lease was renewed through another region, held while
// replication from there lags, still writes.
func TestWritesFollowTheImportsLeaseRule(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var skew atomic.Int64 // how far the cache's clock runs ahead; the cache reads it from its own goroutines
	st := memory.New()
	cache := imports.New(imports.Options{Store: st, Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
		Leases: imports.LeaseOptions{Region: "r", Hold: 2 * time.Minute, Lag: func() map[string]time.Duration { return map[string]time.Duration{"elsewhere": time.Minute} }}})
	go func() { _ = cache.Run(ctx) }()
	svc := New(Options{Store: st, Cache: cache})
	if _, err := svc.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a", Region: "r", LeaseDuration: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"PutExport": func() error { _, err := svc.PutExport(ctx, export("one", 80, "10.0.0.1")); return err },
		"DeleteExport": func() error {
			_, err := svc.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "one"}})
			return err
		},
		"SyncExports": func() error {
			_, err := svc.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "a"})
			return err
		},
	}
	for name, write := range writes {
		skew.Store(0)
		if err := write(); err != nil {
			t.Fatalf("%s within the lease: %v", name, err)
		}
		skew.Store(int64(time.Minute + time.Second))
		if err := write(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "register again") {
			t.Errorf("%s past the lease: %v, want FAILED_PRECONDITION saying register again", name, err)
		}
	}
	// Renewed through another region a minute late: held for that lag past its expiry.
	now := time.Now()
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "h", Region: "elsewhere", RenewRegion: "elsewhere",
		LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(time.Minute + time.Second))
	held := export("one", 80, "10.0.0.9")
	held.ClusterId = "h"
	if v := cache.Judge(store.Cluster{ClusterID: "h", Clusterset: "prod", RenewRegion: "elsewhere", LeaseDuration: time.Minute, RenewTime: now}); v.State != registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION {
		t.Fatalf("cluster h past its lease: %v, want held", v.State)
	}
	if _, err := svc.PutExport(ctx, held); err != nil {
		t.Errorf("PutExport of a held cluster: %v, want it taken", err)
	}
}
