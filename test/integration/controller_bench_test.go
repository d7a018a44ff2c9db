package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// BenchmarkExportEndpointChurn changes the readiness of the 1,000 endpoints of one exported
// Service (10 slices of 100) one at a time, as fast as the API server takes the updates,
// and reports how many export writes reached the registry for those 1,000 changes and how
// long after the last change the registry held the final state. The controller runs with
// its default --endpoint-batch-period (500ms).
//
//	cd test && go test -run '^$' -bench ExportEndpointChurn -benchtime 1x ./integration/
func BenchmarkExportEndpointChurn(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cl := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	for _, o := range []client.Object{namespace("dynamo"), service("dynamo", "big", 80), serviceExport("dynamo", "big")} {
		if err := cl.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	var slices []*discoveryv1.EndpointSlice
	for s := range 10 {
		var ips []string
		for e := range 100 {
			ips = append(ips, fmt.Sprintf("10.1.%d.%d", s, e))
		}
		sl := slice("dynamo", "big", fmt.Sprintf("big-%02d", s), ips...)
		if err := cl.Client.Create(ctx, sl); err != nil {
			b.Fatal(err)
		}
		slices = append(slices, sl)
	}
	cl.StartController(b, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1")
	waitReadyCount(b, reg, 1000)
	for i := 0; b.Loop(); i++ {
		ready := i%2 == 1 // the first round makes every endpoint unready, the next ready again
		want := 0
		if ready {
			want = 1000
		}
		before := registryWrites(b, reg)
		start := time.Now()
		for e := range 1000 {
			s := slices[e/100]
			s.Endpoints[e%100].Conditions.Ready = ptr.To(ready)
			if err := cl.Client.Update(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		churn := time.Since(start)
		last := time.Now()
		waitReadyCount(b, reg, want)
		b.ReportMetric(float64(registryWrites(b, reg)-before), "registry-writes/1000-changes")
		b.ReportMetric(float64(time.Since(last).Milliseconds()), "ms-after-last-change")
		b.ReportMetric(churn.Seconds(), "s-of-churn")
	}
}

// waitReadyCount waits until the registry's export of dynamo/big has want ready endpoints.
func waitReadyCount(b *testing.B, reg *harness.Registry, want int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, body, err := harness.Get("http://" + reg.RESTAddr + "/v1/clustersets/prod/exports?includeEndpoints=true")
		if err == nil {
			var resp struct {
				Exports []struct {
					EndpointGroups []struct {
						Endpoints []struct {
							Conditions struct{ Ready *bool }
						}
					} `json:"endpointGroups"`
				}
			}
			if json.Unmarshal([]byte(body), &resp) == nil && len(resp.Exports) == 1 {
				n := 0
				for _, g := range resp.Exports[0].EndpointGroups {
					for _, e := range g.Endpoints {
						if e.Conditions.Ready != nil && *e.Conditions.Ready {
							n++
						}
					}
				}
				if n == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the registry never held %d ready endpoints", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkExportReadinessFlip flips the readiness of one endpoint of an exported Service
// (one EndpointSlice update) and measures until a registry watch (gRPC, with endpoints)
// shows it, with the controller's default --endpoint-batch-period (500ms) and one flip
// every 600 ms (a quiet Service). The floor, measured in the same run, is what the flip
// cannot avoid: the EndpointSlice update's own round trip plus a PutExport round trip to
// the same registry seen by the same watch. Reported: p50 and p99 of the flips, the floor's
// p50, and p99 over that floor.
//
//	cd test && go test -run '^$' -bench ExportReadinessFlip -benchtime 40x ./integration/
func BenchmarkExportReadinessFlip(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cl := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	var ips []string
	for e := range 10 {
		ips = append(ips, fmt.Sprintf("10.1.0.%d", e+1))
	}
	sl := slice("dynamo", "flip", "flip-x", ips...)
	for _, o := range []client.Object{namespace("dynamo"), service("dynamo", "flip", 80), serviceExport("dynamo", "flip"), sl} {
		if err := cl.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	cl.StartController(b, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1")
	c := dial(b, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "floor", LeaseDuration: durationpb.New(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	// Every watch message is handed over with the time it arrived.
	type seen struct {
		at   time.Time
		resp *registryv1.WatchImportsResponse
	}
	msgs := make(chan seen, 1024)
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			resp, err := w.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- seen{time.Now(), resp}
		}
	}()
	// until waits for a message whose import of name satisfies ok.
	until := func(name string, ok func(*registryv1.ServiceImport) bool) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case m, open := <-msgs:
				if !open {
					b.Fatal("the watch ended")
				}
				for _, imp := range m.resp.GetUpserts() {
					if imp.GetService().GetName() == name && ok(imp) {
						return m.at
					}
				}
			case <-timeout:
				b.Fatalf("%s never reached the watch", name)
			}
		}
	}
	firstReady := func(want bool) func(*registryv1.ServiceImport) bool {
		return func(imp *registryv1.ServiceImport) bool {
			for _, cl := range imp.GetClusters() {
				if cl.GetClusterId() == "use1-a" {
					for _, g := range cl.GetEndpointGroups() {
						for _, e := range g.GetEndpoints() {
							if len(e.GetAddresses()) == 1 && e.GetAddresses()[0] == "10.1.0.1" {
								return e.GetConditions().GetReady() == want
							}
						}
					}
				}
			}
			return false
		}
	}
	until("flip", firstReady(true))
	var flips, floors []time.Duration
	for i := 0; b.Loop(); i++ {
		time.Sleep(600 * time.Millisecond) // a quiet Service: the last write is a batch period old
		ready := i%2 == 1
		sl.Endpoints[0].Conditions.Ready = ptr.To(ready)
		start := time.Now()
		if err := cl.Client.Update(ctx, sl); err != nil {
			b.Fatal(err)
		}
		updated := time.Since(start)
		flips = append(flips, until("flip", firstReady(ready)).Sub(start))

		// The floor: the update's round trip, and a PutExport seen by the watch.
		put := time.Now()
		port := int32(1000 + i)
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "floor",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "floor"}, Spec: relaySpec(port), EndpointGroups: endpoints("10.2.0.1")}); err != nil {
			b.Fatal(err)
		}
		seenAt := until("floor", func(imp *registryv1.ServiceImport) bool {
			ports := imp.GetSpec().GetPorts()
			return len(ports) == 1 && ports[0].GetPort() == port
		})
		floors = append(floors, updated+seenAt.Sub(put))
	}
	reportAgainstFloor(b, flips, floors, 0.99)
}

// readyWatch follows the imported EndpointSlices of a Service in one cluster and reports on
// ch the time of every change of the readiness of the endpoint with addr.
func readyWatch(b testing.TB, c *harness.Cluster, ns, svc, addr string) <-chan readyAt {
	ch := make(chan readyAt, 1024)
	watchSlices(b, c, ns, client.MatchingLabels{"multicluster.kubernetes.io/service-name": svc}, func(at time.Time, s *discoveryv1.EndpointSlice) {
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 1 && e.Addresses[0] == addr {
				ch <- readyAt{at: at, ready: e.Conditions.Ready != nil && *e.Conditions.Ready}
			}
		}
	})
	return ch
}

// watchSlices watches the EndpointSlices of a namespace with the labels until the test
// ends, and gives each change to seen, with the time it arrived, on the watch's goroutine.
func watchSlices(tb testing.TB, c *harness.Cluster, ns string, labels client.MatchingLabels, seen func(time.Time, *discoveryv1.EndpointSlice)) {
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	w, err := wc.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns), labels)
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
				seen(time.Now(), s)
			}
		}
	}()
}

// newFlipper creates dynamo/flip in cluster a (10 endpoints), watches its imported slices
// in b and c, and returns a function that flips the first endpoint's readiness and waits
// until b and c both show it: the time that took, and the update's own round trip in a.
func newFlipper(tb testing.TB, cls []*harness.Cluster) func(ready bool) (took, update time.Duration) {
	ctx := context.Background()
	a := cls[0]
	var ips []string
	for e := range 10 {
		ips = append(ips, fmt.Sprintf("10.1.0.%d", e+1))
	}
	sl := slice("dynamo", "flip", "flip-x", ips...)
	for _, o := range []client.Object{service("dynamo", "flip", 80), serviceExport("dynamo", "flip"), sl} {
		if err := a.Client.Create(ctx, o); err != nil {
			tb.Fatal(err)
		}
	}
	inB, inC := readyWatch(tb, cls[1], "dynamo", "flip", "10.1.0.1"), readyWatch(tb, cls[2], "dynamo", "flip", "10.1.0.1")
	until := func(ch <-chan readyAt, want bool) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case r := <-ch:
				if r.ready == want {
					return r.at
				}
			case <-timeout:
				tb.Fatal("the imported slice never showed the change")
			}
		}
	}
	until(inB, true)
	until(inC, true)
	return func(ready bool) (time.Duration, time.Duration) {
		sl.Endpoints[0].Conditions.Ready = ptr.To(ready)
		start := time.Now()
		if err := a.Client.Update(ctx, sl); err != nil {
			tb.Fatal(err)
		}
		updated := time.Since(start)
		return max(until(inB, ready).Sub(start), until(inC, ready).Sub(start)), updated
	}
}

type readyAt struct {
	at    time.Time
	ready bool
}

// BenchmarkPropagationReadinessFlip: three real clusters with their controllers (default
// flags) and the registry; one endpoint's readiness flips in cluster A (one EndpointSlice
// update, every 800 ms), measured until the imported EndpointSlices in B and in C both show
// it (a watch in each). The floor, measured in the same run: the update's own round trip in
// A, a PutExport round trip seen by a registry watch, and an EndpointSlice update's round
// trip in B — the three writes the path cannot avoid.
//
//	cd test && go test -run '^$' -bench PropagationReadinessFlip -benchtime 30x -timeout 20m ./integration/
func BenchmarkPropagationReadinessFlip(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cls, _ := threeClusters(b, reg, nil, "dynamo")
	flip := newFlipper(b, cls)

	// For the floor: a registry watch, and a slice of B's own to update.
	c, w := floorWatch(b, reg)
	own := slice("dynamo", "own", "own-x", "10.3.0.1")
	if err := cls[1].Client.Create(ctx, own); err != nil {
		b.Fatal(err)
	}
	var flips, floors []time.Duration
	for i := 0; b.Loop(); i++ {
		time.Sleep(800 * time.Millisecond)
		ready := i%2 == 1
		took, updated := flip(ready)
		flips = append(flips, took)

		floors = append(floors, updated+readinessFloor(b, c, w, i, cls[1], own, ready))
	}
	reportAgainstFloor(b, flips, floors, 0.99)
}

// readinessFloor is the part of a readiness flip's floor after the source's own update: a
// PutExport (the i-th) seen by the floor watch, then an update of s in cl with its first
// endpoint's readiness.
func readinessFloor(b *testing.B, c registryv1.RegistryServiceClient, w registryv1.RegistryService_WatchImportsClient, i int, cl *harness.Cluster, s *discoveryv1.EndpointSlice, ready bool) time.Duration {
	ctx := context.Background()
	put := time.Now()
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "floor",
		Service: &registryv1.ServiceKey{Namespace: "floor", Name: "floor"}, Spec: relaySpec(int32(1000 + i)), EndpointGroups: endpoints("10.2.0.1")}); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		b.Fatal(err)
	}
	registryTrip := time.Since(put)
	s.Endpoints[0].Conditions.Ready = ptr.To(ready)
	t := time.Now()
	if err := cl.Client.Update(ctx, s); err != nil {
		b.Fatal(err)
	}
	return registryTrip + time.Since(t)
}

// BenchmarkPropagationNewExport: three real clusters with their controllers (default
// flags); each iteration creates a new Service with one EndpointSlice and its ServiceExport
// in cluster A, and measures until B and C both have an imported EndpointSlice of it (a
// watch in each). The floor of the same run: the three creates in A, a PutExport seen by a
// registry watch, and the three creates an import makes in B (ServiceImport, Service,
// EndpointSlice, in a namespace nothing imports into), each timed as the same client
// makes them.
//
//	cd test && go test -run '^$' -bench PropagationNewExport -benchtime 20x -timeout 20m ./integration/
func BenchmarkPropagationNewExport(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cls, _ := threeClusters(b, reg, nil, "dynamo", "local")
	a := cls[0]
	// Imported slices of any Service in dynamo, by Service name.
	arrived := func(c *harness.Cluster) <-chan string {
		wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		b.Cleanup(cancel)
		w, err := wc.Watch(wctx, &discoveryv1.EndpointSliceList{}, client.InNamespace("dynamo"), client.HasLabels{"multicluster.kubernetes.io/service-name"})
		if err != nil {
			b.Fatal(err)
		}
		ch := make(chan string, 1024)
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && len(s.Endpoints) > 0 {
					ch <- s.Labels["multicluster.kubernetes.io/service-name"]
				}
			}
		}()
		return ch
	}
	inB, inC := arrived(cls[1]), arrived(cls[2])
	until := func(ch <-chan string, name string) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case n := <-ch:
				if n == name {
					return time.Now()
				}
			case <-timeout:
				b.Fatalf("%s was never imported", name)
			}
		}
	}
	c, w := floorWatch(b, reg)
	var took, floors []time.Duration
	for i := 0; b.Loop(); i++ {
		time.Sleep(300 * time.Millisecond)
		name := fmt.Sprintf("new-%03d", i)
		start := time.Now()
		for _, o := range []client.Object{service("dynamo", name, 80), slice("dynamo", name, name+"-x", "10.4.0.1"), serviceExport("dynamo", name)} {
			if err := a.Client.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		created := time.Since(start)
		tb, tc := until(inB, name), until(inC, name)
		took = append(took, max(tb.Sub(start), tc.Sub(start)))

		put := time.Now()
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "floor",
			Service: &registryv1.ServiceKey{Namespace: "floor", Name: name}, Spec: relaySpec(80), EndpointGroups: endpoints("10.2.0.1")}); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			b.Fatal(err)
		}
		registryTrip := time.Since(put)
		t := time.Now()
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "local", Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
		for _, o := range []client.Object{si, service("local", name, 80), slice("local", name, name+"-x", "10.4.0.1")} {
			if err := cls[1].Client.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		floors = append(floors, created+registryTrip+time.Since(t))
	}
	reportAgainstFloor(b, took, floors, 0.5)
}

// reportAgainstFloor reports the p50 and p99 of the measured times, the p50 of the floor
// measured in the same run, and the measured time at quantile q over that floor.
func reportAgainstFloor(b *testing.B, took, floors []time.Duration, q float64) {
	slices.Sort(took)
	slices.Sort(floors)
	at := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	floor := at(floors, 0.5)
	b.ReportMetric(float64(at(took, 0.5).Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(at(took, 0.99).Microseconds())/1000, "ms-p99")
	b.ReportMetric(float64(floor.Microseconds())/1000, "ms-floor-p50")
	b.ReportMetric(float64(at(took, q))/float64(floor), fmt.Sprintf("p%.0f/floor", q*100))
}

// threeClusters starts clusters a, b and c with the namespaces and a controller each
// (default flags, and extra) on the registry.
func threeClusters(b testing.TB, reg *harness.Registry, extra []string, namespaces ...string) ([]*harness.Cluster, []*harness.Controller) {
	cls := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"a", "b", "c"}})
	var ctls []*harness.Controller
	for _, cl := range cls {
		for _, ns := range namespaces {
			if err := cl.Client.Create(context.Background(), namespace(ns)); err != nil {
				b.Fatal(err)
			}
		}
		ctls = append(ctls, cl.StartController(b, "mcs-controller", append([]string{"--registry-url=http://" + reg.GRPCAddr, "--registry-allow-insecure-http",
			"--clusterset-id=prod", "--cluster-id=" + cl.Name, "--region=r"}, extra...)...))
	}
	return cls, ctls
}

// floorWatch registers cluster "floor" and watches the imports of namespace floor, for
// timing a PutExport until a watch has it.
func floorWatch(b *testing.B, reg *harness.Registry) (registryv1.RegistryServiceClient, registryv1.RegistryService_WatchImportsClient) {
	ctx := context.Background()
	c := dial(b, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "floor", LeaseDuration: durationpb.New(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", Namespace: "floor"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		b.Fatal(err)
	}
	return c, w
}
