package imports

import (
	"context"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// blockedClusterReads holds every GetCluster until release is closed, and then answers
// that the cluster does not exist: a read made before the cluster's registration.
type blockedClusterReads struct {
	*memory.Store
	entered, release chan struct{}
}

func (s blockedClusterReads) GetCluster(ctx context.Context, k store.ClusterKey) (store.Cluster, error) {
	s.entered <- struct{}{}
	<-s.release
	return store.Cluster{}, store.ErrClusterNotFound
}

// TestKnownClusterStateWaitsForNoRead: a cluster's state known without a read (a
// registration's or renewal's result) is applied at once while a read of the store is in
// flight — a renewal must not queue behind other reads, or leases expire while it waits —
// and that read, begun before, does not undo it when it ends.
func TestKnownClusterStateWaitsForNoRead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem := memory.New()
	st := blockedClusterReads{Store: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := New(Options{Store: st})
	now := time.Now()
	a, err := mem.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := c.List(ctx, "prod", Filter{}); err != nil || snap.Clusters != 1 {
		t.Fatalf("List(prod) = %+v, %v; want 1 cluster", snap, err)
	}
	// A change of the cluster without its state: the cache reads it, and the read waits.
	refreshed := make(chan error, 1)
	go func() {
		refreshed <- c.Apply(ctx, store.Change{Kind: store.ChangeCluster, Clusterset: "prod", ClusterID: "a"})
	}()
	<-st.entered
	renewed := a
	renewed.RenewTime = now.Add(time.Second)
	applied := make(chan error, 1)
	go func() { applied <- c.Apply(ctx, store.ClusterWritten(renewed)) }()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a renewal's result waited for a read of the store in flight")
	}
	close(st.release)
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if snap, err := c.List(ctx, "prod", Filter{}); err != nil || snap.Clusters != 1 {
		t.Fatalf("after the read begun before the renewal ended: List(prod) = %+v, %v; want the renewed cluster", snap, err)
	}
}
