package locality

import (
	"maps"
	"slices"
	"strings"
	"testing"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

const (
	tc = registryv1.LocalityTier_LOCALITY_TIER_CLUSTER
	tr = registryv1.LocalityTier_LOCALITY_TIER_REGION
	ta = registryv1.LocalityTier_LOCALITY_TIER_ANY
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    []registryv1.LocalityTier
		wantErr string
	}{
		{"cluster", []registryv1.LocalityTier{tc}, ""},
		{"cluster,region", []registryv1.LocalityTier{tc, tr}, ""},
		{" region , cluster ,any", []registryv1.LocalityTier{tr, tc, ta}, ""},
		{"any", []registryv1.LocalityTier{ta}, ""},
		{"", nil, `"" is not a tier`},
		{"cluster,", nil, `"" is not a tier`},
		{"zone", nil, `"zone" is not a tier`},
		{"Cluster", nil, `"Cluster" is not a tier`},
		{"cluster,cluster", nil, `tier "cluster" is named twice`},
	}
	for _, c := range tests {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %q", c.in, err, c.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			if back, _ := Parse(Format(got)); !slices.Equal(back, got) {
				t.Fatalf("Format(%v) = %q does not parse back", got, Format(got))
			}
		})
	}
}

// use1-a imports from use1-a, use1-b (its region) and euw1-a.
func sources(a, b, e int) []Source {
	return []Source{{"euw1-a", "eu-west-1", e}, {"use1-a", "us-east-1", a}, {"use1-b", "us-east-1", b}}
}

func TestChoose(t *testing.T) {
	cr := []registryv1.LocalityTier{tc, tr}
	oneZone := []string{"us-east-1a"}
	tests := []struct {
		name             string
		policy           []registryv1.LocalityTier
		region           string
		zones            []string
		nodesWithoutZone int
		sources          []Source
		tier             registryv1.LocalityTier
		active           []string
		hinted           bool
		preferred        bool
		reason           string
		message          string // a part of the message
	}{
		{"own cluster ready", cr, "us-east-1", oneZone, 0, sources(2, 1, 1), tc, []string{"use1-a"}, true, true, ReasonCluster, "traffic goes to tier cluster (cluster use1-a)"},
		{"own cluster down: region", cr, "us-east-1", oneZone, 0, sources(0, 1, 1), tr, []string{"use1-a", "use1-b"}, true, false, ReasonRegion, "no ready endpoint in cluster (cluster use1-a)"},
		{"region down: every cluster", cr, "us-east-1", oneZone, 0, sources(0, 0, 1), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, false, ReasonAny, "no ready endpoint in cluster (cluster use1-a), region (region us-east-1)"},
		{"no ready endpoint anywhere", cr, "us-east-1", oneZone, 0, sources(0, 0, 0), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, false, ReasonAny, "every source cluster"},
		{"only remote sources", cr, "us-east-1", oneZone, 0, []Source{{"euw1-a", "eu-west-1", 3}}, ta, []string{"euw1-a"}, false, false, ReasonAny, ""},
		{"no sources at all", cr, "us-east-1", oneZone, 0, nil, ta, nil, false, false, ReasonAny, ""},
		{"region first", []registryv1.LocalityTier{tr, tc}, "us-east-1", oneZone, 0, sources(2, 1, 1), tr, []string{"use1-a", "use1-b"}, true, true, ReasonRegion, ""},
		{"any first ends the policy", []registryv1.LocalityTier{ta, tc}, "us-east-1", oneZone, 0, sources(2, 1, 1), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, true, ReasonAny, ""},
		{"no policy is any", nil, "us-east-1", oneZone, 0, sources(2, 1, 1), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, true, ReasonAny, "policy any"},
		{"no own region: the region tier is empty", []registryv1.LocalityTier{tr}, "", oneZone, 0, sources(2, 1, 1), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, false, ReasonAny, ""},
		{"nodes without zones", cr, "us-east-1", oneZone, 2, sources(2, 1, 1), tc, []string{"use1-a"}, true, true, ReasonHintsUnavailable, "2 nodes have no topology.kubernetes.io/zone label"},
		{"more than 8 zones", cr, "us-east-1", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, 0, sources(2, 1, 1), tc, []string{"use1-a"}, true, true, ReasonHintsUnavailable, "9 zones, and hints name at most 8"},
		{"hints unavailable do not matter for any", cr, "us-east-1", nil, 3, sources(0, 0, 1), ta, []string{"euw1-a", "use1-a", "use1-b"}, false, false, ReasonAny, ""},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			d := Choose(Input{Policy: c.policy, Cluster: "use1-a", Region: c.region, Zones: c.zones, NodesWithoutZone: c.nodesWithoutZone, Sources: c.sources})
			active := slices.Sorted(maps.Keys(d.Active))
			if d.Tier != c.tier || !slices.Equal(active, c.active) || d.Hinted != c.hinted || d.Preferred != c.preferred || d.Reason != c.reason {
				t.Fatalf("Choose = tier %v active %v hinted %v preferred %v reason %s; want %v %v %v %v %s",
					d.Tier, active, d.Hinted, d.Preferred, d.Reason, c.tier, c.active, c.hinted, c.preferred, c.reason)
			}
			if !strings.Contains(d.Message, c.message) {
				t.Fatalf("message %q lacks %q", d.Message, c.message)
			}
		})
	}
}

func TestSourcesOf(t *testing.T) {
	ready, notReady := true, false
	ep := func(r *bool) *registryv1.Endpoint {
		e := &registryv1.Endpoint{Addresses: []string{"10.0.0.1"}}
		if r != nil {
			e.Conditions = &registryv1.EndpointConditions{Ready: r}
		}
		return e
	}
	imp := &registryv1.ServiceImport{Clusters: []*registryv1.ImportCluster{
		{ClusterId: "a", Region: "r1", EndpointGroups: []*registryv1.EndpointGroup{
			{Endpoints: []*registryv1.Endpoint{ep(&ready), ep(&notReady)}},
			{Endpoints: []*registryv1.Endpoint{ep(nil)}},
		}},
		{ClusterId: "b", Region: "r2", EndpointGroups: []*registryv1.EndpointGroup{{Endpoints: []*registryv1.Endpoint{ep(&notReady)}}}},
		{ClusterId: "c"},
	}}
	want := []Source{{ClusterID: "a", Region: "r1", Ready: 2}, {ClusterID: "b", Region: "r2"}, {ClusterID: "c"}}
	if got := SourcesOf(imp); !slices.Equal(got, want) {
		t.Fatalf("SourcesOf = %+v, want %+v (an endpoint without conditions is ready)", got, want)
	}
	if got := SourcesOf(nil); len(got) != 0 {
		t.Fatalf("SourcesOf(nil) = %+v, want none", got)
	}
}
