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
	if len(deleted) != 1 || deleted[0] != (store.ServiceKey{Namespace: "dynamo", Name: "old"}) || len(stored) != 2 {
		t.Fatalf("SyncExports = %d stored, deleted %v; want 2, and a's dynamo/old deleted", len(stored), deleted)
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

func testListClusterExports(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, id := range []string{"b", "a"} {
		mustRegister(t, s, cluster("prod", id, t0))
	}
	mustRegister(t, s, cluster("other", "a", t0))
	for _, e := range []store.Export{
		export("prod", "b", "z", "svc", 80, t0), export("prod", "a", "z", "svc", 81, t0),
		export("prod", "b", "a", "svc", 80, t0), export("prod", "a", "a", "xyz", 80, t0),
		export("other", "a", "q", "svc", 80, t0),
	} {
		mustPut(t, s, e)
	}
	for _, tc := range []struct {
		key  store.ClusterKey
		want string
	}{
		{store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, "[a/xyz@a:80 z/svc@a:81]"},
		{store.ClusterKey{Clusterset: "prod", ClusterID: "b"}, "[a/svc@b:80 z/svc@b:80]"},
		{store.ClusterKey{Clusterset: "prod", ClusterID: "ghost"}, "[]"},
		{store.ClusterKey{Clusterset: "nowhere", ClusterID: "a"}, "[]"},
	} {
		list, bad, err := s.ListClusterExports(ctx, tc.key)
		if err != nil || len(bad) != 0 {
			t.Fatalf("ListClusterExports(%v) = %v, %v, %v", tc.key, list, bad, err)
		}
		got := []string{}
		for _, e := range list {
			got = append(got, fmt.Sprintf("%s@%s:%d", e.Service, e.ClusterID, e.Spec.GetPorts()[0].GetPort()))
			if len(e.EndpointGroups) == 0 {
				t.Errorf("ListClusterExports(%v): %s without its endpoints", tc.key, e.Service)
			}
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("ListClusterExports(%v) = %v, want %s", tc.key, got, tc.want)
		}
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
		if _, err := fmt.Sscanf(e.ClusterID, "c%d", &c); err != nil {
			t.Fatalf("cluster id %q: %v", e.ClusterID, err)
		}
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

// testSyncExportsMany syncs more exports than one DynamoDB transaction holds (99 export
// items), one of them with endpoints too large for one item, then syncs again with some
// changed, some unchanged, one grown past one item and one shrunk back: every export reads
// back as synced, create times are kept, and nothing of another cluster changes.
func testSyncExportsMany(t *testing.T, s store.Store) {
	ctx := context.Background()
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	mustRegister(t, s, cluster("prod", "a", t0))
	mustRegister(t, s, cluster("prod", "b", t0))
	mustPut(t, s, export("prod", "b", "dynamo", "svc-000", 80, t0))
	big := func(e store.Export) store.Export {
		g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: e.EndpointGroups[0].Ports}
		for i := range 10000 {
			g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.9.%d.%d", i/256, i%256)},
				Hostname: fmt.Sprintf("worker-%05d", i), TargetPod: fmt.Sprintf("my-dgd-worker-7d9f8c6b5-%05d", i)})
		}
		e.EndpointGroups = []*registryv1.EndpointGroup{g}
		return e
	}
	const n = 250
	set := func(at time.Time, port func(i int) int32, large int) []store.Export {
		out := make([]store.Export, n)
		for i := range n {
			out[i] = export("prod", "a", "dynamo", fmt.Sprintf("svc-%03d", i), port(i), at)
			if i == large {
				out[i] = big(out[i])
			}
		}
		return out
	}
	first := set(t0, func(int) int32 { return 80 }, 7)
	if _, _, err := s.SyncExports(ctx, key, first); err != nil {
		t.Fatalf("SyncExports of %d: %v", n, err)
	}
	later := t0.Add(time.Hour)
	// Every third export changes its port; export 7 shrinks back to one endpoint, export 200 grows.
	second := set(later, func(i int) int32 { return 80 + int32(i%3/2) }, 200)
	stored, deleted, err := s.SyncExports(ctx, key, second)
	if err != nil || len(deleted) != 0 || len(stored) != n {
		t.Fatalf("second SyncExports = %d stored, deleted %v, %v; want %d, none, nil", len(stored), deleted, err, n)
	}
	for i, e := range stored {
		if !sameTime(e.CreateTime, t0) {
			t.Fatalf("stored[%d] (%s) create time %v, want %v", i, e.Service, e.CreateTime, t0)
		}
	}
	list, err := s.ListExports(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]store.Export{}
	for _, e := range list {
		byKey[e.ClusterID+":"+e.Service.Name] = e
	}
	if len(list) != n+1 {
		t.Fatalf("ListExports = %d exports, want %d", len(list), n+1)
	}
	for i, want := range second {
		got := byKey["a:"+want.Service.Name]
		if !proto.Equal(got.Spec, want.Spec) || len(got.EndpointGroups) != 1 || !proto.Equal(got.EndpointGroups[0], want.EndpointGroups[0]) {
			t.Fatalf("export %d (%s) did not read back as synced: port %v, %d groups", i, want.Service, got.Spec.GetPorts(), len(got.EndpointGroups))
		}
	}
	if b := byKey["b:svc-000"]; b.Spec.GetPorts()[0].GetPort() != 80 || !sameTime(b.UpdateTime, t0) {
		t.Fatalf("another cluster's export changed: %v at %v", b.Spec, b.UpdateTime)
	}
}
