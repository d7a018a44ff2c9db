// Package storetest is the conformance suite every registry store passes. A store's own
// tests call Run with a function that returns a fresh, empty store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) store.Store

// t0 is a fixed base time; stores must keep times to the millisecond at least.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the conformance suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RegisterAndGet", testRegisterAndGet},
		{"ReRegisterKeepsRegisterTime", testReRegisterKeepsRegisterTime},
		{"RenewNeverCreates", testRenewNeverCreates},
		{"ListClustersSortedAndScoped", testListClustersSortedAndScoped},
		{"PutExportNeedsCluster", testPutExportNeedsCluster},
		{"PutExportKeepsCreateTime", testPutExportKeepsCreateTime},
		{"DeleteExport", testDeleteExport},
		{"DeleteClusterRemovesExports", testDeleteClusterRemovesExports},
		{"SyncExportsReplacesSet", testSyncExportsReplacesSet},
		{"ListExportsSorted", testListExportsSorted},
		{"LargeEndpointSet", testLargeEndpointSet},
		{"ChangesDelivered", testChangesDelivered},
		{"ConcurrentWriters", testConcurrentWriters},
		{"AbandonedWritesDoNotApply", testAbandonedWritesDoNotApply},
		{"Ping", func(t *testing.T, s store.Store) {
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func cluster(cs, id string, renew time.Time) store.Cluster {
	return store.Cluster{Clusterset: cs, ClusterID: id, Region: "us-east-1", LeaseDuration: 30 * time.Second, RegisterTime: renew, RenewTime: renew}
}

func export(cs, id, ns, name string, port int32, at time.Time) store.Export {
	return store.Export{
		Clusterset: cs, ClusterID: id,
		Service: store.ServiceKey{Namespace: ns, Name: name},
		Spec: &registryv1.ExportSpec{
			Type:  registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: port}},
		},
		EndpointGroups: []*registryv1.EndpointGroup{{
			AddressType: "IPv4",
			Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints:   []*registryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}}},
		}},
		CreateTime: at, UpdateTime: at,
	}
}

func mustRegister(t *testing.T, s store.Store, c store.Cluster) store.Cluster {
	t.Helper()
	got, err := s.RegisterCluster(context.Background(), c)
	if err != nil {
		t.Fatalf("RegisterCluster(%s/%s): %v", c.Clusterset, c.ClusterID, err)
	}
	return got
}

func mustPut(t *testing.T, s store.Store, e store.Export) store.Export {
	t.Helper()
	got, err := s.PutExport(context.Background(), e)
	if err != nil {
		t.Fatalf("PutExport(%s from %s): %v", e.Service, e.ClusterID, err)
	}
	return got
}

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

func testRegisterAndGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := mustRegister(t, s, cluster("prod", "use1-a", t0))
	got, err := s.GetCluster(ctx, c.Key())
	if err != nil {
		t.Fatalf("GetCluster: %v", err)
	}
	if got.Region != "us-east-1" || got.LeaseDuration != 30*time.Second || !sameTime(got.RenewTime, t0) || !sameTime(got.RegisterTime, t0) {
		t.Fatalf("GetCluster = %+v", got)
	}
	if _, err := s.GetCluster(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "nope"}); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("GetCluster(unknown) error = %v, want ErrClusterNotFound", err)
	}
}

func testReRegisterKeepsRegisterTime(t *testing.T, s store.Store) {
	mustRegister(t, s, cluster("prod", "use1-a", t0))
	later := t0.Add(time.Minute)
	c := cluster("prod", "use1-a", later)
	c.Region = "us-east-2"
	got := mustRegister(t, s, c)
	if !sameTime(got.RegisterTime, t0) || !sameTime(got.RenewTime, later) || got.Region != "us-east-2" {
		t.Fatalf("re-registered cluster = %+v, want RegisterTime %v kept, RenewTime %v, region us-east-2", got, t0, later)
	}
}

func testRenewNeverCreates(t *testing.T, s store.Store) {
	ctx := context.Background()
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	if _, err := s.RenewLease(ctx, key, t0); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("RenewLease(unregistered) error = %v, want ErrClusterNotFound", err)
	}
	if cs, _ := s.ListClusters(ctx, "prod"); len(cs) != 0 {
		t.Fatalf("renewal created a cluster: %+v", cs)
	}
	mustRegister(t, s, cluster("prod", "use1-a", t0))
	got, err := s.RenewLease(ctx, key, t0.Add(10*time.Second))
	if err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	if !sameTime(got.RenewTime, t0.Add(10*time.Second)) || !sameTime(got.ExpireTime(), t0.Add(40*time.Second)) {
		t.Fatalf("renewed cluster = %+v", got)
	}
	if _, err := s.DeleteCluster(ctx, key); err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	if _, err := s.RenewLease(ctx, key, t0.Add(20*time.Second)); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("RenewLease(deleted) error = %v, want ErrClusterNotFound", err)
	}
	if _, err := s.GetCluster(ctx, key); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("renewal resurrected a deleted cluster: %v", err)
	}
}

func testListClustersSortedAndScoped(t *testing.T, s store.Store) {
	for _, id := range []string{"c", "a", "b"} {
		mustRegister(t, s, cluster("prod", id, t0))
	}
	mustRegister(t, s, cluster("staging", "z", t0))
	got, err := s.ListClusters(context.Background(), "prod")
	if err != nil {
		t.Fatalf("ListClusters: %v", err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ClusterID)
	}
	if fmt.Sprint(ids) != "[a b c]" {
		t.Fatalf("ListClusters(prod) ids = %v, want [a b c]", ids)
	}
	if got, _ := s.ListClusters(context.Background(), "unknown"); len(got) != 0 {
		t.Fatalf("ListClusters(unknown) = %v, want none", got)
	}
}

func testPutExportNeedsCluster(t *testing.T, s store.Store) {
	_, err := s.PutExport(context.Background(), export("prod", "ghost", "dynamo", "svc", 80, t0))
	if !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("PutExport from unregistered cluster error = %v, want ErrClusterNotFound", err)
	}
	if got, _ := s.ListExports(context.Background(), "prod"); len(got) != 0 {
		t.Fatalf("refused export was stored: %v", got)
	}
}

func testPutExportKeepsCreateTime(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustRegister(t, s, cluster("prod", "a", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "svc", 80, t0))
	later := t0.Add(time.Hour)
	got := mustPut(t, s, export("prod", "a", "dynamo", "svc", 81, later))
	if !sameTime(got.CreateTime, t0) || !sameTime(got.UpdateTime, later) {
		t.Fatalf("rewritten export times = create %v update %v, want create %v update %v", got.CreateTime, got.UpdateTime, t0, later)
	}
	list, err := s.ListServiceExports(ctx, "prod", store.ServiceKey{Namespace: "dynamo", Name: "svc"})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListServiceExports = %v, %v", list, err)
	}
	if list[0].Spec.GetPorts()[0].GetPort() != 81 || !sameTime(list[0].CreateTime, t0) {
		t.Fatalf("stored export = %+v", list[0])
	}
	if n := len(list[0].EndpointGroups); n != 1 || !proto.Equal(list[0].EndpointGroups[0], got.EndpointGroups[0]) {
		t.Fatalf("stored endpoint groups differ: %v", list[0].EndpointGroups)
	}
}

func testDeleteExport(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustRegister(t, s, cluster("prod", "a", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "svc", 80, t0))
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	svc := store.ServiceKey{Namespace: "dynamo", Name: "svc"}
	if ok, err := s.DeleteExport(ctx, key, svc); err != nil || !ok {
		t.Fatalf("DeleteExport = %v, %v; want true", ok, err)
	}
	if ok, err := s.DeleteExport(ctx, key, svc); err != nil || ok {
		t.Fatalf("second DeleteExport = %v, %v; want false", ok, err)
	}
	// A new export after deletion gets a new create time.
	got := mustPut(t, s, export("prod", "a", "dynamo", "svc", 80, t0.Add(time.Hour)))
	if !sameTime(got.CreateTime, t0.Add(time.Hour)) {
		t.Fatalf("re-created export kept the old create time %v", got.CreateTime)
	}
}

func testDeleteClusterRemovesExports(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustRegister(t, s, cluster("prod", "a", t0))
	mustRegister(t, s, cluster("prod", "b", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "one", 80, t0))
	mustPut(t, s, export("prod", "a", "dynamo", "two", 80, t0))
	mustPut(t, s, export("prod", "b", "dynamo", "one", 80, t0))
	n, err := s.DeleteCluster(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"})
	if err != nil || n != 2 {
		t.Fatalf("DeleteCluster = %d, %v; want 2 exports removed", n, err)
	}
	list, _ := s.ListExports(ctx, "prod")
	if len(list) != 1 || list[0].ClusterID != "b" {
		t.Fatalf("exports after delete = %v, want only b's", list)
	}
	if _, err := s.DeleteCluster(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("second DeleteCluster error = %v, want ErrClusterNotFound", err)
	}
}

func testSyncExportsReplacesSet(t *testing.T, s store.Store) {
	ctx := context.Background()
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	if _, _, err := s.SyncExports(ctx, key, nil); !errors.Is(err, store.ErrClusterNotFound) {
		t.Fatalf("SyncExports(unregistered) error = %v", err)
	}
	mustRegister(t, s, cluster("prod", "a", t0))
	mustRegister(t, s, cluster("prod", "b", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "old", 80, t0))
	mustPut(t, s, export("prod", "a", "dynamo", "kept", 80, t0))
	mustPut(t, s, export("prod", "b", "dynamo", "old", 80, t0))
	later := t0.Add(time.Hour)
	stored, deleted, err := s.SyncExports(ctx, key, []store.Export{
		export("prod", "a", "dynamo", "kept", 81, later),
		export("prod", "a", "other", "new", 80, later),
	})
	if err != nil {
		t.Fatalf("SyncExports: %v", err)
	}
	if deleted != 1 || len(stored) != 2 {
		t.Fatalf("SyncExports = %d stored, %d deleted; want 2, 1", len(stored), deleted)
	}
	if !sameTime(stored[0].CreateTime, t0) || !sameTime(stored[1].CreateTime, later) {
		t.Fatalf("SyncExports create times = %v, %v", stored[0].CreateTime, stored[1].CreateTime)
	}
	list, _ := s.ListExports(ctx, "prod")
	var got []string
	for _, e := range list {
		got = append(got, e.ClusterID+":"+e.Service.String())
	}
	if want := "[a:dynamo/kept b:dynamo/old a:other/new]"; fmt.Sprint(got) != want {
		t.Fatalf("exports after sync = %v, want %s", got, want)
	}
}

func testListExportsSorted(t *testing.T, s store.Store) {
	for _, id := range []string{"b", "a"} {
		mustRegister(t, s, cluster("prod", id, t0))
	}
	for _, e := range []store.Export{
		export("prod", "b", "z", "svc", 80, t0), export("prod", "a", "z", "svc", 80, t0),
		export("prod", "b", "a", "svc", 80, t0), export("prod", "a", "a", "xyz", 80, t0),
	} {
		mustPut(t, s, e)
	}
	list, err := s.ListExports(context.Background(), "prod")
	if err != nil {
		t.Fatalf("ListExports: %v", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Service.String()+"@"+e.ClusterID)
	}
	if want := "[a/svc@b a/xyz@a z/svc@a z/svc@b]"; fmt.Sprint(got) != want {
		t.Fatalf("ListExports order = %v, want %s", got, want)
	}
}

// testLargeEndpointSet stores 10,000 endpoints in one export: more than one DynamoDB item
// holds, so a store must split them and join them back unchanged.
func testLargeEndpointSet(t *testing.T, s store.Store) {
	mustRegister(t, s, cluster("prod", "a", t0))
	e := export("prod", "a", "dynamo", "big", 80, t0)
	g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: e.EndpointGroups[0].Ports}
	for i := range 10000 {
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)},
			Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(i%3 != 0), Serving: proto.Bool(true)},
			Hostname:   fmt.Sprintf("worker-%05d", i),
			Zone:       "us-east-1a",
			NodeName:   fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/256, i%256),
			TargetPod:  fmt.Sprintf("my-dgd-worker-7d9f8c6b5-%05d", i),
		})
	}
	e.EndpointGroups = []*registryv1.EndpointGroup{g}
	mustPut(t, s, e)
	list, err := s.ListServiceExports(context.Background(), "prod", e.Service)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListServiceExports = %d, %v", len(list), err)
	}
	if len(list[0].EndpointGroups) != 1 || !proto.Equal(list[0].EndpointGroups[0], g) {
		t.Fatalf("10,000-endpoint group did not round-trip (%d groups)", len(list[0].EndpointGroups))
	}
	// Shrinking the set must not leave parts of the old one behind.
	small := export("prod", "a", "dynamo", "big", 80, t0)
	mustPut(t, s, small)
	list, _ = s.ListServiceExports(context.Background(), "prod", e.Service)
	if len(list) != 1 || len(list[0].EndpointGroups) != 1 || len(list[0].EndpointGroups[0].Endpoints) != 1 {
		t.Fatalf("after shrinking, stored groups = %v", len(list[0].EndpointGroups))
	}
}

func testChangesDelivered(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Changes(ctx)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	mustRegister(t, s, cluster("prod", "a", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "svc", 80, t0))
	wantCluster, wantExport := false, false
	timeout := time.After(30 * time.Second)
	for !wantCluster || !wantExport {
		select {
		case c := <-ch:
			switch {
			case c.Kind == store.ChangeCluster && c.Clusterset == "prod" && c.ClusterID == "a":
				wantCluster = true
			case c.Kind == store.ChangeExport && c.Clusterset == "prod" && c.Service == (store.ServiceKey{Namespace: "dynamo", Name: "svc"}):
				wantExport = true
			case c.Kind == store.ChangeResync:
				wantCluster, wantExport = true, true
			}
		case <-timeout:
			t.Fatalf("changes not delivered: cluster=%v export=%v", wantCluster, wantExport)
		}
	}
}

func testConcurrentWriters(t *testing.T, s store.Store) {
	ctx := context.Background()
	const clusters, services = 4, 10
	for c := range clusters {
		mustRegister(t, s, cluster("prod", fmt.Sprintf("c%d", c), t0))
	}
	var wg sync.WaitGroup
	errs := make(chan error, clusters*services*2)
	for c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%d", c)
			for i := range services {
				// The first write of each export sets its create time; later writes keep it.
				first := t0.Add(time.Duration(c) * time.Second)
				if _, err := s.PutExport(ctx, export("prod", id, "dynamo", fmt.Sprintf("svc%d", i), 80, first)); err != nil {
					errs <- err
				}
				if _, err := s.PutExport(ctx, export("prod", id, "dynamo", fmt.Sprintf("svc%d", i), 81, first.Add(time.Hour))); err != nil {
					errs <- err
				}
				if _, err := s.RenewLease(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id}, t0.Add(time.Duration(i)*time.Second)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	list, err := s.ListExports(ctx, "prod")
	if err != nil || len(list) != clusters*services {
		t.Fatalf("ListExports = %d exports, %v; want %d", len(list), err, clusters*services)
	}
	for _, e := range list {
		var c int
		fmt.Sscanf(e.ClusterID, "c%d", &c)
		if !sameTime(e.CreateTime, t0.Add(time.Duration(c)*time.Second)) || e.Spec.GetPorts()[0].GetPort() != 81 {
			t.Fatalf("export %s from %s: create %v port %d", e.Service, e.ClusterID, e.CreateTime, e.Spec.GetPorts()[0].GetPort())
		}
	}
}

// testAbandonedWritesDoNotApply: a write whose caller already gave up is not applied, so
// it cannot land after the caller's next write or delete.
func testAbandonedWritesDoNotApply(t *testing.T, s store.Store) {
	mustRegister(t, s, cluster("prod", "a", t0))
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	svc := store.ServiceKey{Namespace: "dynamo", Name: "svc"}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.PutExport(gone, export("prod", "a", "dynamo", "svc", 80, t0)); err == nil {
		t.Fatal("PutExport with a cancelled context succeeded")
	}
	if _, _, err := s.SyncExports(gone, key, []store.Export{export("prod", "a", "dynamo", "svc", 81, t0)}); err == nil {
		t.Fatal("SyncExports with a cancelled context succeeded")
	}
	if list, err := s.ListServiceExports(context.Background(), "prod", svc); err != nil || len(list) != 0 {
		t.Fatalf("abandoned writes applied: %v, %v", list, err)
	}
	mustPut(t, s, export("prod", "a", "dynamo", "svc", 82, t0))
	if _, err := s.DeleteExport(gone, key, svc); err == nil {
		t.Fatal("DeleteExport with a cancelled context succeeded")
	}
	if list, err := s.ListServiceExports(context.Background(), "prod", svc); err != nil || len(list) != 1 || list[0].Spec.GetPorts()[0].GetPort() != 82 {
		t.Fatalf("an abandoned delete applied, or a later write was lost: %v, %v", list, err)
	}
	// A write after a delete applies (the delete's fence is older than it).
	if ok, err := s.DeleteExport(context.Background(), key, svc); err != nil || !ok {
		t.Fatalf("DeleteExport = %v, %v", ok, err)
	}
	mustPut(t, s, export("prod", "a", "dynamo", "svc", 83, t0))
	if list, err := s.ListServiceExports(context.Background(), "prod", svc); err != nil || len(list) != 1 || list[0].Spec.GetPorts()[0].GetPort() != 83 {
		t.Fatalf("a write after a delete did not apply: %v, %v", list, err)
	}
}
