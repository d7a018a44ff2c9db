package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
	st "github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery/slicetest"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestDiscoverySubscribe uses the library in process: a subscriber gets the current
// snapshot, then each new one as slices change in a real API server.
func TestDiscoverySubscribe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo")
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	d, err := discovery.New(discovery.Config{Mode: discovery.ModeKarmada}, cs, nil, discovery.Observer{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Run(ctx) }()
	sub := d.Subscribe(ctx)
	next := func() discovery.Snapshot {
		t.Helper()
		select {
		case s := <-sub:
			return s
		case <-ctx.Done():
			t.Fatal("no snapshot")
		}
		return discovery.Snapshot{}
	}
	// The first snapshot: nothing yet (the subscriber may be registered before the cache syncs).
	if s := next(); len(s.Pools) != 0 {
		t.Fatalf("first snapshot has pools: %+v", s.Pools)
	}
	createSlices(t, ctx, cl.Client, st.Karmada("member1", "dynamo", "my-dgd-pool-relay", "a1", relayPorts, st.Endpoint{IP: "10.1.0.1"}))
	for {
		s := next()
		if len(s.Pools) == 1 && s.Pools[0].Key.ClusterID == "member1" && s.Generation > 0 {
			return
		}
	}
}
