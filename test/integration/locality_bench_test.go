package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// hintAt is when a watch saw an imported slice's first endpoint hinted for a zone.
type hintAt struct {
	at   time.Time
	zone string
}

// hintWatch reports the zone hint of each change of the slices service imports from source.
func hintWatch(b testing.TB, c *harness.Cluster, ns, service, source string) <-chan hintAt {
	ch := make(chan hintAt, 1024)
	labels := client.MatchingLabels{"multicluster.kubernetes.io/service-name": service, "multicluster.kubernetes.io/source-cluster": source}
	watchSlices(b, c, ns, labels, func(at time.Time, s *discoveryv1.EndpointSlice) {
		if len(s.Endpoints) == 0 {
			return
		}
		zone := ""
		if h := s.Endpoints[0].Hints; h != nil && len(h.ForZones) > 0 {
			zone = h.ForZones[0].Name
		}
		ch <- hintAt{at: at, zone: zone}
	})
	return ch
}

// BenchmarkLocalityTierChange: three real clusters with their controllers (default flags,
// so the policy cluster,region): a and b in region r1, c in r2, each exporting dynamo/tier
// with 10 ready endpoints; a has a node in zone z1. Each iteration flips every endpoint of
// a's own slice (one EndpointSlice update): not ready, so a's tier moves to its region and
// b's imported slice in a gets hinted for z1; ready again, so it moves back and b's slice is
// hinted away. Measured from the update until a watch in a sees b's slice re-hinted. The
// floor of the same run, as BenchmarkPropagationReadinessFlip's: the update's own round trip
// in a, a PutExport seen by a registry watch, and an EndpointSlice update's round trip in a.
//
//	cd test && go test -run '^$' -bench LocalityTierChange -benchtime 60x -timeout 20m ./integration/
func BenchmarkLocalityTierChange(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cls := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"a", "b", "c"}})
	regions := map[string]string{"a": "r1", "b": "r1", "c": "r2"}
	var own *discoveryv1.EndpointSlice
	for i, cl := range cls {
		if err := cl.Client.Create(ctx, namespace("dynamo")); err != nil {
			b.Fatal(err)
		}
		var ips []string
		for e := range 10 {
			ips = append(ips, fmt.Sprintf("10.%d.0.%d", i+1, e+1))
		}
		sl := slice("dynamo", "tier", "tier-x", ips...)
		for _, o := range []client.Object{service("dynamo", "tier", 80), serviceExport("dynamo", "tier"), sl} {
			if err := cl.Client.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		if i == 0 {
			own = sl
			if _, err := cl.CreateNode(ctx, "node-a", map[string]string{"topology.kubernetes.io/zone": "z1"}); err != nil {
				b.Fatal(err)
			}
		}
		cl.StartController(b, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
			"--clusterset-id=prod", "--cluster-id="+cl.Name, "--region="+regions[cl.Name])
	}
	a := cls[0]
	region := hintWatch(b, a, "dynamo", "tier", "b")
	until := func(zone string) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case h := <-region:
				if h.zone == zone {
					return h.at
				}
			case <-timeout:
				b.Fatalf("b's slice in a was never hinted for %q", zone)
			}
		}
	}
	until("multicluster.dynamo.nvidia.com-inactive") // a's own tier is active
	c, w := floorWatch(b, reg)
	floorSlice := slice("dynamo", "floor", "floor-x", "10.9.0.1")
	if err := a.Client.Create(ctx, floorSlice); err != nil {
		b.Fatal(err)
	}
	var took, floors []time.Duration
	for i := 0; b.Loop(); i++ {
		time.Sleep(800 * time.Millisecond)
		ready := i%2 == 1
		for e := range own.Endpoints {
			own.Endpoints[e].Conditions.Ready = ptr.To(ready)
		}
		start := time.Now()
		if err := a.Client.Update(ctx, own); err != nil {
			b.Fatal(err)
		}
		updated := time.Since(start)
		want := "z1"
		if ready {
			want = "multicluster.dynamo.nvidia.com-inactive"
		}
		took = append(took, until(want).Sub(start))
		floors = append(floors, updated+readinessFloor(b, c, w, i, a, floorSlice, ready))
	}
	reportAgainstFloor(b, took, floors, 0.99)
}
