package importer

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
)

// Zone names of the hints the importer writes. kube-proxy sends a node's traffic only to
// the ready endpoints hinted for the node's zone while there is one, else to every ready
// endpoint: endpoints of the active tier are hinted for every zone of the cluster's nodes,
// the others for InactiveZone, which no node has. The clusterset.local DNS plugin answers
// a headless Service from the endpoints not hinted for InactiveZone alone.
const (
	InactiveZone = "multicluster.dynamo.nvidia.com-inactive"
	// ActiveZone hints the active tier when no node has a zone: kube-proxy then follows no
	// hint (the Locality condition says so), and DNS still tells the tiers apart.
	ActiveZone = "multicluster.dynamo.nvidia.com-active"
)

// Labels of the imported slices that tell a reader (the Global Discovery Service) where a
// source cluster is, seen from this cluster.
const (
	// SourceRegionLabel is the source cluster's registered region (absent when unknown).
	SourceRegionLabel = "multicluster.dynamo.nvidia.com/source-region"
	// LocalityTierLabel is the nearest tier the source cluster belongs to, from this
	// cluster: cluster (itself), region (its region) or any.
	LocalityTierLabel = "multicluster.dynamo.nvidia.com/locality-tier"
)

// LabelSources labels each slice with its source cluster's region and nearest tier.
func LabelSources(imported []*discoveryv1.EndpointSlice, imp *registryv1.ServiceImport, cluster, region string) {
	regions := map[string]string{}
	for _, c := range imp.GetClusters() {
		regions[c.GetClusterId()] = c.GetRegion()
	}
	for _, s := range imported {
		src := s.Labels[mcsv1beta1.LabelSourceCluster]
		tier := locality.Any
		switch {
		case src == cluster:
			tier = locality.Cluster
		case region != "" && regions[src] == region:
			tier = locality.Region
		}
		s.Labels[LocalityTierLabel] = tier
		if r := regions[src]; r != "" {
			s.Labels[SourceRegionLabel] = r
		}
	}
}

// ConditionLocality is the ServiceImport condition that says which tier takes the traffic:
// True while it is the policy's first tier, False after a fallback or while hints cannot
// work on some node; its reason is the tier (Cluster, Region, Any) or HintsUnavailable.
const ConditionLocality = "Locality"

// ReasonLocalityChanged is the reason of the Event recorded when an import's tier changes.
const ReasonLocalityChanged = "LocalityChanged"

// Topology is what the tier choice needs of the importing cluster's nodes.
type Topology struct {
	Zones            []string
	NodesWithoutZone int
}

// nodesChanged marks the cached topology stale (a Node was added, deleted or moved zone).
func (r *Reconciler) nodesChanged() { r.topoFresh.Store(false) }

// topology returns the zones of the cluster's nodes, read again from the cache only after
// a Node event: an import's reconcile does not walk every node.
func (r *Reconciler) topology(ctx context.Context) (Topology, error) {
	r.topoMu.Lock()
	defer r.topoMu.Unlock()
	// Marked fresh before the read: a Node event during it marks it stale again.
	if r.topoFresh.Swap(true) {
		return r.topo, nil
	}
	t, err := r.readTopology(ctx)
	if err != nil {
		r.topoFresh.Store(false)
		return Topology{}, err
	}
	r.topo = t
	return t, nil
}

// readTopology reads the zones of the cluster's nodes from the cache (metadata only).
func (r *Reconciler) readTopology(ctx context.Context) (Topology, error) {
	var nodes metav1.PartialObjectMetadataList
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, &nodes); err != nil {
		return Topology{}, fmt.Errorf("list Nodes: %w", err)
	}
	var t Topology
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
			zones[z] = true
		} else {
			t.NodesWithoutZone++
		}
	}
	t.Zones = slices.Sorted(maps.Keys(zones))
	return t, nil
}

// Localize decides the import's tier and writes it into d's slices: the zone hints and the
// source labels (what the importer adds to DesiredFor). def is the policy of an import that
// sets none; cluster and region are the importing cluster's.
func (d *Desired) Localize(imp *registryv1.ServiceImport, def []registryv1.LocalityTier, cluster, region string, t Topology) {
	d.Locality = LocalityFor(imp, def, cluster, region, t)
	Hint(d.Slices, d.Locality, t.Zones)
	LabelSources(d.Slices, imp, cluster, region)
}

// LocalityFor decides an import's tier: the import's policy, else def.
func LocalityFor(imp *registryv1.ServiceImport, def []registryv1.LocalityTier, cluster, region string, t Topology) locality.Decision {
	policy := imp.GetSpec().GetLocality()
	if len(policy) == 0 {
		policy = def
	}
	in := locality.Input{Policy: policy, Cluster: cluster, Region: region, Zones: t.Zones, NodesWithoutZone: t.NodesWithoutZone, Sources: locality.SourcesOf(imp)}
	return locality.Choose(in)
}

// Hint sets the zone hints of the imported slices by the decision: none when every
// cluster takes the traffic.
func Hint(imported []*discoveryv1.EndpointSlice, d locality.Decision, zones []string) {
	active := zones
	if len(active) > locality.MaxZoneHints {
		active = active[:locality.MaxZoneHints]
	}
	if len(active) == 0 {
		active = []string{ActiveZone}
	}
	for _, s := range imported {
		var forZones []discoveryv1.ForZone
		if d.Hinted {
			names := []string{InactiveZone}
			if d.Active[s.Labels[mcsv1beta1.LabelSourceCluster]] {
				names = active
			}
			for _, z := range names {
				forZones = append(forZones, discoveryv1.ForZone{Name: z})
			}
		}
		for i := range s.Endpoints {
			if forZones == nil {
				s.Endpoints[i].Hints = nil
				continue
			}
			s.Endpoints[i].Hints = &discoveryv1.EndpointHints{ForZones: slices.Clone(forZones)}
		}
	}
}

// localityCondition is the Locality condition of a decision.
func localityCondition(d locality.Decision, generation int64) metav1.Condition {
	status := metav1.ConditionTrue
	if !d.Preferred || d.Reason == locality.ReasonHintsUnavailable {
		status = metav1.ConditionFalse
	}
	return metav1.Condition{Type: ConditionLocality, Status: status, Reason: d.Reason, Message: d.Message, ObservedGeneration: generation}
}

// noteTier records the import's tier: an Event and the metrics when it changed.
func (r *Reconciler) noteTier(key types.NamespacedName, si *mcsv1beta1.ServiceImport, d locality.Decision) {
	tier := locality.Name(d.Tier)
	r.mu.Lock()
	if r.tiers == nil {
		r.tiers = map[types.NamespacedName]string{}
	}
	was, known := r.tiers[key]
	r.tiers[key] = tier
	r.mu.Unlock()
	if known && was == tier {
		return
	}
	if f := r.Metrics.Tier; f != nil {
		f(key.Namespace, key.Name, tier, known)
	}
	if known && r.Recorder != nil && si != nil {
		r.Recorder.Eventf(si, nil, corev1.EventTypeNormal, ReasonLocalityChanged, "Locality",
			"traffic moves from tier %s to tier %s: %s", was, tier, d.Message)
	}
}

// forgetTier drops a removed import's tier and its metric series.
func (r *Reconciler) forgetTier(key types.NamespacedName) {
	r.mu.Lock()
	_, known := r.tiers[key]
	delete(r.tiers, key)
	r.mu.Unlock()
	if known {
		if f := r.Metrics.TierGone; f != nil {
			f(key.Namespace, key.Name)
		}
	}
}

// zoneChanged passes the Node events that may change the set of zones: a node added or
// deleted, or its zone label changed.
var zoneChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetLabels()[corev1.LabelTopologyZone] != e.ObjectNew.GetLabels()[corev1.LabelTopologyZone]
	},
}
