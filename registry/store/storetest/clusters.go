package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

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
	c.ControllerVersion = "v1.3.0"
	got := mustRegister(t, s, c)
	if !sameTime(got.RegisterTime, t0) || !sameTime(got.RenewTime, later) || got.Region != "us-east-2" || got.ControllerVersion != "v1.3.0" {
		t.Fatalf("re-registered cluster = %+v, want RegisterTime %v kept, RenewTime %v, region us-east-2, controller v1.3.0", got, t0, later)
	}
	if read, err := s.GetCluster(context.Background(), c.Key()); err != nil || read.ControllerVersion != "v1.3.0" {
		t.Fatalf("GetCluster after re-registering = %+v, %v; want controller v1.3.0", read, err)
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
