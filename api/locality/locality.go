// Package locality is a Service's locality policy: the annotation that sets it, and the
// pure choice of the tier an importing cluster sends the Service's traffic to — the first
// tier of the policy with a ready endpoint, every cluster when none has one (KEP-5939's
// ordered tiers).
package locality

import (
	"fmt"
	"slices"
	"strings"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Annotation sets a Service's locality policy on its ServiceExport (or, for an export made
// from the export label, on the Service): tiers separated by commas, for example
// "cluster,region".
const Annotation = "multicluster.dynamo.nvidia.com/locality"

// Default is the policy of a Service whose exports set none, unless the importing
// controller's --default-locality says otherwise: its own cluster, then its region.
const Default = "cluster,region"

// Tier names, as the annotation, the flag and the condition reasons spell them.
const (
	Cluster = "cluster"
	Region  = "region"
	Any     = "any"
)

var byName = map[string]registryv1.LocalityTier{
	Cluster: registryv1.LocalityTier_LOCALITY_TIER_CLUSTER,
	Region:  registryv1.LocalityTier_LOCALITY_TIER_REGION,
	Any:     registryv1.LocalityTier_LOCALITY_TIER_ANY,
}

// Parse reads a policy: "cluster", "region" and "any" separated by commas, each at most
// once, spaces around them ignored.
func Parse(s string) ([]registryv1.LocalityTier, error) {
	var out []registryv1.LocalityTier
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		t, ok := byName[w]
		if !ok {
			return nil, fmt.Errorf("%q is not a tier: a policy is cluster, region and any separated by commas, for example \"cluster,region\"", w)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("tier %q is named twice", w)
		}
		out = append(out, t)
	}
	return out, nil
}

// Name is a tier's name ("cluster"); "any" for an unknown one.
func Name(t registryv1.LocalityTier) string {
	switch t {
	case registryv1.LocalityTier_LOCALITY_TIER_CLUSTER:
		return Cluster
	case registryv1.LocalityTier_LOCALITY_TIER_REGION:
		return Region
	default:
		return Any
	}
}

// Format writes a policy as the annotation does.
func Format(tiers []registryv1.LocalityTier) string {
	names := make([]string, len(tiers))
	for i, t := range tiers {
		names[i] = Name(t)
	}
	return strings.Join(names, ",")
}

// Source is one source cluster of an import: its region and how many of its endpoints
// are ready (an endpoint whose ready condition is unset counts as ready).
type Source struct {
	ClusterID, Region string
	Ready             int
}

// SourcesOf are an import's source clusters with their regions and ready endpoints.
func SourcesOf(imp *registryv1.ServiceImport) []Source {
	var out []Source
	for _, c := range imp.GetClusters() {
		s := Source{ClusterID: c.GetClusterId(), Region: c.GetRegion()}
		for _, g := range c.GetEndpointGroups() {
			for _, e := range g.GetEndpoints() {
				// An endpoint without conditions (the registry accepts it) is ready, as
				// an EndpointSlice consumer reads it.
				if c := e.GetConditions(); c == nil || c.Ready == nil || *c.Ready {
					s.Ready++
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// MaxZoneHints is the most zones one endpoint's hints may name (discovery.k8s.io/v1).
const MaxZoneHints = 8

// Input is what the choice depends on: the import's policy (its own, else the
// controller's default), the importing cluster, its nodes' zones, and the sources.
type Input struct {
	Policy          []registryv1.LocalityTier
	Cluster, Region string
	// Zones are the distinct zones of the importing cluster's nodes.
	Zones []string
	// NodesWithoutZone counts the importing cluster's nodes without the zone label.
	NodesWithoutZone int
	Sources          []Source
}

// Reasons of the ServiceImport's Locality condition: the active tier's name, capitalized,
// or HintsUnavailable.
const (
	ReasonCluster          = "Cluster"
	ReasonRegion           = "Region"
	ReasonAny              = "Any"
	ReasonHintsUnavailable = "HintsUnavailable"
)

// Decision is the tier an import's traffic goes to and how the data plane is told.
type Decision struct {
	// Tier is the active tier: the policy's first with a ready endpoint, else ANY.
	Tier registryv1.LocalityTier
	// Active are the source clusters whose endpoints take the traffic; every source when
	// Tier is ANY.
	Active map[string]bool
	// Hinted: the slices carry hints (the active tier is narrower than every cluster).
	Hinted bool
	// Preferred: Tier is the policy's first tier (or the policy is any).
	Preferred bool
	// Reason and Message are the Locality condition's.
	Reason, Message string
}

// Choose picks the active tier. It is a pure function of its input.
func Choose(in Input) Decision {
	policy := in.Policy
	if len(policy) == 0 {
		policy = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_ANY}
	}
	d := Decision{Tier: registryv1.LocalityTier_LOCALITY_TIER_ANY, Active: map[string]bool{}}
	first := policy[0]
	var skipped []string
	for _, t := range policy {
		if t == registryv1.LocalityTier_LOCALITY_TIER_ANY {
			break
		}
		members, ready := tierMembers(t, in)
		if ready > 0 {
			d.Tier, d.Active = t, members
			break
		}
		skipped = append(skipped, fmt.Sprintf("%s (%s)", Name(t), scope(t, in)))
	}
	if d.Tier == registryv1.LocalityTier_LOCALITY_TIER_ANY {
		for _, s := range in.Sources {
			d.Active[s.ClusterID] = true
		}
	}
	d.Preferred = d.Tier == first || (first == registryv1.LocalityTier_LOCALITY_TIER_ANY)
	d.Hinted = d.Tier != registryv1.LocalityTier_LOCALITY_TIER_ANY
	d.Reason = reasonOf(d.Tier)
	d.Message = fmt.Sprintf("policy %s; traffic goes to tier %s", Format(policy), Name(d.Tier))
	if d.Tier == registryv1.LocalityTier_LOCALITY_TIER_ANY {
		d.Message += ": every source cluster"
	} else {
		d.Message += " (" + scope(d.Tier, in) + ")"
	}
	if len(skipped) > 0 {
		d.Message += "; no ready endpoint in " + strings.Join(skipped, ", ")
	}
	if d.Hinted {
		if problem := hintProblem(in); problem != "" {
			d.Reason = ReasonHintsUnavailable
			d.Message += "; " + problem
		}
	}
	return d
}

// hintProblem says what keeps kube-proxy from following the hints on some node, or "".
func hintProblem(in Input) string {
	var p []string
	if in.NodesWithoutZone > 0 {
		p = append(p, fmt.Sprintf("%d nodes have no topology.kubernetes.io/zone label, and kube-proxy on them ignores hints", in.NodesWithoutZone))
	}
	if len(in.Zones) > MaxZoneHints {
		p = append(p, fmt.Sprintf("the nodes are in %d zones, and hints name at most %d: kube-proxy in the others ignores them", len(in.Zones), MaxZoneHints))
	}
	return strings.Join(p, "; ")
}

// reasonOf is a tier's condition reason: its name, capitalized.
func reasonOf(t registryv1.LocalityTier) string {
	n := Name(t)
	return strings.ToUpper(n[:1]) + n[1:]
}

func scope(t registryv1.LocalityTier, in Input) string {
	if t == registryv1.LocalityTier_LOCALITY_TIER_CLUSTER {
		return "cluster " + in.Cluster
	}
	return "region " + in.Region
}

// tierMembers returns the sources of a tier and how many ready endpoints they have. A
// region tier needs the importing cluster's region: without one it holds no cluster.
func tierMembers(t registryv1.LocalityTier, in Input) (map[string]bool, int) {
	members, ready := map[string]bool{}, 0
	for _, s := range in.Sources {
		member := false
		switch t {
		case registryv1.LocalityTier_LOCALITY_TIER_CLUSTER:
			member = s.ClusterID == in.Cluster
		case registryv1.LocalityTier_LOCALITY_TIER_REGION:
			member = in.Region != "" && s.Region == in.Region
		}
		if member {
			members[s.ClusterID] = true
			ready += s.Ready
		}
	}
	return members, ready
}
