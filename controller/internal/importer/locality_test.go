package importer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
)

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	return n
}

// hintsOf lists each source cluster's zone hints, as kube-proxy reads them: "-" for none.
func hintsOf(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range imported(t, c) {
		for _, e := range s.Endpoints {
			h := "-"
			if e.Hints != nil {
				var z []string
				for _, f := range e.Hints.ForZones {
					z = append(z, f.Name)
				}
				h = strings.Join(z, "+")
			}
			out[s.Labels[mcsv1beta1.LabelSourceCluster]] = h
		}
	}
	return out
}

// TestLocalityHints: use1-a imports a Service of use1-a, use1-b (its region) and euw1-a
// with the policy cluster,region. Its own endpoints are hinted for every zone of its nodes
// and the others for a zone no node has; when its endpoints stop being ready the region
// takes the traffic, then every cluster (no hints); the condition, the metric and the
// Event follow each change.
func TestLocalityHints(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "dynamo", Name: "router"}
	imp := routerImport("euw1-a", "use1-a", "use1-b")
	for _, c := range imp.Clusters {
		c.Region = map[string]string{"euw1-a": "eu-west-1", "use1-a": "us-east-1", "use1-b": "us-east-1"}[c.ClusterId]
	}
	imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{key: imp}}
	r, c, _ := newImporter(t, imps, namespace("dynamo"), node("n1", "us-east-1a"), node("n2", "us-east-1b"))
	r.ClusterID, r.Region = "use1-a", "us-east-1"
	r.DefaultLocality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION}
	var tiers []string
	r.Metrics.Tier = func(ns, name, tier string, changed bool) { tiers = append(tiers, fmt.Sprintf("%s %v", tier, changed)) }
	rec := events.NewFakeRecorder(16)
	r.Recorder = rec

	step := func(name string, want map[string]string, status metav1.ConditionStatus, reason string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := hintsOf(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: hints %v, want %v", name, got, want)
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := c.Get(ctx, key, si); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(si.Status.Conditions, ConditionLocality)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			t.Fatalf("%s: Locality condition %+v, want %s %s", name, cond, status, reason)
		}
	}
	both, inactive := "us-east-1a+us-east-1b", InactiveZone
	step("own cluster ready", map[string]string{"use1-a": both, "use1-b": inactive, "euw1-a": inactive}, metav1.ConditionTrue, locality.ReasonCluster)

	imp.Clusters[1].EndpointGroups[0].Endpoints[0].Conditions.Ready = ptr.To(false)
	step("own cluster not ready: the region", map[string]string{"use1-a": both, "use1-b": both, "euw1-a": inactive}, metav1.ConditionFalse, locality.ReasonRegion)

	imp.Clusters[2].EndpointGroups[0].Endpoints[0].Conditions.Ready = ptr.To(false)
	step("region not ready: every cluster, no hints", map[string]string{"use1-a": "-", "use1-b": "-", "euw1-a": "-"}, metav1.ConditionFalse, locality.ReasonAny)

	imp.Clusters[1].EndpointGroups[0].Endpoints[0].Conditions.Ready = nil // unset reads as ready
	imp.Spec.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_REGION}
	step("the import's own policy wins over the default", map[string]string{"use1-a": both, "use1-b": both, "euw1-a": inactive}, metav1.ConditionTrue, locality.ReasonRegion)

	if err := c.Delete(ctx, node("n2", "")); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, node("n3", "")); err != nil {
		t.Fatal(err)
	}
	step("the node events not yet seen: the zones as last read", map[string]string{"use1-a": both, "use1-b": both, "euw1-a": inactive}, metav1.ConditionTrue, locality.ReasonRegion)
	r.nodesChanged() // what the Node watch does
	step("a node without a zone", map[string]string{"use1-a": "us-east-1a", "use1-b": "us-east-1a", "euw1-a": inactive}, metav1.ConditionFalse, locality.ReasonHintsUnavailable)

	if want := []string{"cluster false", "region true", "any true", "region true"}; !slices.Equal(tiers, want) {
		t.Fatalf("tier reports %v, want %v", tiers, want)
	}
	// One Event per change, none for the first tier.
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	if len(got) != 3 || !strings.Contains(got[0], "LocalityChanged traffic moves from tier cluster to tier region") {
		t.Fatalf("Events %q, want three LocalityChanged", got)
	}
}

// TestHintZones: at most 8 zones per endpoint; a cluster whose nodes have no zone still
// tells the tiers apart for DNS.
func TestHintZones(t *testing.T) {
	d := locality.Decision{Hinted: true, Active: map[string]bool{"a": true}}
	mk := func() []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{
			{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: "a"}}, Endpoints: []discoveryv1.Endpoint{{}}},
			{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: "b"}}, Endpoints: []discoveryv1.Endpoint{{}}},
		}
	}
	s := mk()
	Hint(s, d, []string{"z1", "z2", "z3", "z4", "z5", "z6", "z7", "z8", "z9"})
	if n := len(s[0].Endpoints[0].Hints.ForZones); n != locality.MaxZoneHints {
		t.Fatalf("%d zone hints, want %d", n, locality.MaxZoneHints)
	}
	s = mk()
	Hint(s, d, nil)
	if got := s[0].Endpoints[0].Hints.ForZones; len(got) != 1 || got[0].Name != ActiveZone {
		t.Fatalf("active hints without zones = %v", got)
	}
	if got := s[1].Endpoints[0].Hints.ForZones; len(got) != 1 || got[0].Name != InactiveZone {
		t.Fatalf("inactive hints = %v", got)
	}
}

// TestOnlyConflicts: a conflict alone, or several joined, is retried without an error; any
// other error among them is an error.
func TestOnlyConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "endpointslices"}, "x", errors.New("stale"))
	other := errors.New("boom")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{conflict, true},
		{fmt.Errorf("update derived Service: %w", conflict), true},
		{errors.Join(conflict, conflict), true},
		{errors.Join(conflict, other), false},
		{other, false},
	} {
		if got := onlyConflicts(tc.err); got != tc.want {
			t.Errorf("onlyConflicts(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestTopologyReadOnce: the nodes' zones are read once, and again only after a Node
// event; a reconcile that asks while another is reading them waits for that read instead of
// taking the topology before it (no zones, which hints the placeholder zone).
func TestTopologyReadOnce(t *testing.T) {
	node := func(name, zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	}
	r, c, _ := newImporter(t, &fakeImports{}, node("n1", "z1"))
	var lists atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if lists.Add(1) == 1 {
				close(started)
				<-release // the first read is slow
			}
			return c.List(ctx, list, opts...)
		},
	})
	ctx := context.Background()
	first := make(chan Topology)
	go func() {
		topo, err := r.topology(ctx)
		if err != nil {
			t.Error(err)
		}
		first <- topo
	}()
	<-started
	second := make(chan Topology)
	go func() {
		topo, err := r.topology(ctx)
		if err != nil {
			t.Error(err)
		}
		second <- topo
	}()
	time.Sleep(50 * time.Millisecond) // the second caller asks during the first read
	close(release)
	for _, got := range []Topology{<-first, <-second} {
		if !slices.Equal(got.Zones, []string{"z1"}) {
			t.Fatalf("topology %+v, want zone z1 for both callers", got)
		}
	}
	if _, err := r.topology(ctx); err != nil || lists.Load() != 1 {
		t.Fatalf("%d reads of the nodes without a Node event (%v), want 1", lists.Load(), err)
	}
	if err := c.Create(ctx, node("n2", "z2")); err != nil {
		t.Fatal(err)
	}
	r.nodesChanged()
	if got, err := r.topology(ctx); err != nil || !slices.Equal(got.Zones, []string{"z1", "z2"}) || lists.Load() != 2 {
		t.Fatalf("after a Node event: %+v (%v), %d reads; want zones z1 z2 read again", got, err, lists.Load())
	}
}
