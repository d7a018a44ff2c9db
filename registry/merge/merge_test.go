package merge

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

var (
	now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	svc = store.ServiceKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}
)

type R = registryv1.ConflictReason

// conflictsDiff is "" when got holds want's reasons in order (nil and empty alike), else
// the difference.
func conflictsDiff(want, got []R) string { return cmp.Diff(want, got, cmpopts.EquateEmpty()) }

const (
	portC     = registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT
	typeC     = registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT
	affC      = registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFLICT
	affCfgC   = registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFIG_CONFLICT
	labelsC   = registryv1.ConflictReason_CONFLICT_REASON_LABELS_CONFLICT
	annC      = registryv1.ConflictReason_CONFLICT_REASON_ANNOTATIONS_CONFLICT
	itpC      = registryv1.ConflictReason_CONFLICT_REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT
	tdC       = registryv1.ConflictReason_CONFLICT_REASON_TRAFFIC_DISTRIBUTION_CONFLICT
	ipFamC    = registryv1.ConflictReason_CONFLICT_REASON_IP_FAMILY_CONFLICT
	locC      = registryv1.ConflictReason_CONFLICT_REASON_LOCALITY_CONFLICT
	tierC     = registryv1.LocalityTier_LOCALITY_TIER_CLUSTER
	tierR     = registryv1.LocalityTier_LOCALITY_TIER_REGION
	clusterIP = registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP
	headless  = registryv1.ServiceType_SERVICE_TYPE_HEADLESS
)

func port(name, proto string, n int32) *registryv1.ServicePort {
	return &registryv1.ServicePort{Name: name, Protocol: proto, Port: n}
}

func base() *registryv1.ExportSpec {
	return &registryv1.ExportSpec{
		Type:       clusterIP,
		Ports:      []*registryv1.ServicePort{port("http", "TCP", 80)},
		IpFamilies: []string{"IPv4"},
	}
}

// ex is an export of svc by cluster id, first seen age before now.
func ex(id string, age time.Duration, mutate func(*registryv1.ExportSpec)) store.Export {
	s := base()
	if mutate != nil {
		mutate(s)
	}
	return store.Export{Clusterset: "prod", ClusterID: id, Service: svc, Spec: s, CreateTime: now.Add(-age)}
}

func active(ids ...string) map[string]Participant {
	m := map[string]Participant{}
	for _, id := range ids {
		m[id] = Participant{}
	}
	return m
}

func TestConflicts(t *testing.T) {
	tests := []struct {
		name   string
		other  func(*registryv1.ExportSpec)
		want   []R
		winner string
	}{
		{"identical", nil, nil, "a"},
		{"port number differs under the same name", func(s *registryv1.ExportSpec) { s.Ports[0].Port = 81 }, []R{portC}, "a"},
		{"port protocol differs under the same name", func(s *registryv1.ExportSpec) { s.Ports[0].Protocol = "UDP" }, []R{portC}, "a"},
		{"app protocol differs", func(s *registryv1.ExportSpec) { s.Ports[0].AppProtocol = "kubernetes.io/h2c" }, []R{portC}, "a"},
		{"same number under another name", func(s *registryv1.ExportSpec) { s.Ports[0].Name = "web" }, []R{portC}, "a"},
		{"empty protocol equals TCP", func(s *registryv1.ExportSpec) { s.Ports[0].Protocol = "" }, nil, "a"},
		// mcs-api v1beta1: PortConflict "if the ports are not identical in all the
		// constituent Services"; the import still holds the union (checked below).
		{"an extra port is a conflict", func(s *registryv1.ExportSpec) {
			s.Ports = append(s.Ports, port("grpc", "TCP", 9000))
		}, []R{portC}, "a"},
		{"a missing port is a conflict", func(s *registryv1.ExportSpec) { s.Ports = nil }, []R{portC}, "a"},

		{"type", func(s *registryv1.ExportSpec) { s.Type = headless }, []R{typeC}, "a"},
		{"session affinity", func(s *registryv1.ExportSpec) { s.SessionAffinity = "ClientIP" }, []R{affC}, "a"},
		{"explicit None equals empty", func(s *registryv1.ExportSpec) { s.SessionAffinity = "None" }, nil, "a"},
		{"labels", func(s *registryv1.ExportSpec) { s.ExportedLabels = map[string]string{"tier": "gold"} }, []R{labelsC}, "a"},
		{"annotations", func(s *registryv1.ExportSpec) { s.ExportedAnnotations = map[string]string{"x": "y"} }, []R{annC}, "a"},
		{"internal traffic policy", func(s *registryv1.ExportSpec) { s.InternalTrafficPolicy = "Local" }, []R{itpC}, "a"},
		{"explicit Cluster policy equals empty", func(s *registryv1.ExportSpec) { s.InternalTrafficPolicy = "Cluster" }, nil, "a"},
		{"traffic distribution", func(s *registryv1.ExportSpec) { s.TrafficDistribution = "PreferClose" }, []R{tdC}, "a"},
		{"ip families", func(s *registryv1.ExportSpec) { s.IpFamilies = []string{"IPv4", "IPv6"} }, []R{ipFamC}, "a"},
		{"locality set by one export only", func(s *registryv1.ExportSpec) { s.Locality = []registryv1.LocalityTier{tierC} }, []R{locC}, "a"},
		{"locality in another order", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{tierR, tierC}
		}, []R{locC}, "a"},
		{"several at once, sorted", func(s *registryv1.ExportSpec) {
			s.Type = headless
			s.Ports[0].Port = 81
			s.TrafficDistribution = "PreferClose"
		}, []R{portC, typeC, tdC}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// b is newer; a (the oldest) wins.
			imp := Service(svc, []store.Export{ex("b", time.Minute, tc.other), ex("a", time.Hour, nil)}, active("a", "b"))
			if imp == nil {
				t.Fatal("no import")
			}
			if d := conflictsDiff(tc.want, imp.GetConflicts()); d != "" {
				t.Fatalf("conflicts (-want +got):\n%s", d)
			}
			if imp.GetWinningClusterId() != tc.winner {
				t.Fatalf("winner = %s, want %s", imp.GetWinningClusterId(), tc.winner)
			}
			// Every participating export reports the same conflicts.
			for _, c := range imp.GetClusters() {
				if d := conflictsDiff(imp.GetConflicts(), c.GetConflicts()); d != "" {
					t.Fatalf("cluster %s reports other conflicts than the import (-import +cluster):\n%s", c.GetClusterId(), d)
				}
				if v := Verdict(imp, c.GetClusterId()); !v.GetParticipating() || conflictsDiff(imp.GetConflicts(), v.GetConflicts()) != "" {
					t.Fatalf("verdict for %s = %v", c.GetClusterId(), v)
				}
			}
			// The oldest export's spec is imported.
			if imp.GetSpec().GetType() != clusterIP || imp.GetSpec().GetPorts()[0].GetPort() != 80 || imp.GetSpec().GetTrafficDistribution() != "" {
				t.Fatalf("imported spec is not the oldest export's: %v", imp.GetSpec())
			}
		})
	}
}

func TestSessionAffinityConfig(t *testing.T) {
	clientIP := func(timeout int32) func(*registryv1.ExportSpec) {
		return func(s *registryv1.ExportSpec) {
			s.SessionAffinity = "ClientIP"
			if timeout != 0 {
				s.SessionAffinityConfig = &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: timeout}
			}
		}
	}
	tests := []struct {
		name        string
		old, newer  func(*registryv1.ExportSpec)
		want        []R
		wantTimeout int32
	}{
		{"same timeout", clientIP(60), clientIP(60), nil, 60},
		{"different timeout", clientIP(60), clientIP(120), []R{affCfgC}, 60},
		{"unset equals the default", clientIP(0), clientIP(DefaultClientIPTimeoutSeconds), nil, DefaultClientIPTimeoutSeconds},
		{"affinity differs: only the affinity conflict", clientIP(60), nil, []R{affC}, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			imp := Service(svc, []store.Export{ex("a", time.Hour, tc.old), ex("b", time.Minute, tc.newer)}, active("a", "b"))
			if d := conflictsDiff(tc.want, imp.GetConflicts()); d != "" {
				t.Fatalf("conflicts (-want +got):\n%s", d)
			}
			if got := imp.GetSpec().GetSessionAffinityConfig().GetClientIpTimeoutSeconds(); got != tc.wantTimeout {
				t.Fatalf("imported timeout = %d, want %d", got, tc.wantTimeout)
			}
		})
	}
}

func TestWinner(t *testing.T) {
	tests := []struct {
		name    string
		exports []store.Export
		want    string
	}{
		{"oldest wins", []store.Export{ex("a", time.Minute, nil), ex("z", time.Hour, nil)}, "z"},
		{"tie broken by cluster id", []store.Export{ex("b", time.Hour, nil), ex("a", time.Hour, nil), ex("c", time.Hour, nil)}, "a"},
		{"input order does not matter", []store.Export{ex("c", time.Hour, nil), ex("a", time.Hour, nil), ex("b", time.Hour, nil)}, "a"},
		{"an expired oldest export does not win", []store.Export{ex("old", 2*time.Hour, nil), ex("new", time.Minute, nil)}, "new"},
	}
	clusters := active("a", "b", "c", "z", "new") // "old" is registered, its lease expired
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Service(svc, tc.exports, clusters).GetWinningClusterId(); got != tc.want {
				t.Fatalf("winner = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParticipation(t *testing.T) {
	tests := []struct {
		name     string
		clusters map[string]Participant
		want     []string
	}{
		{"both active", active("a", "b"), []string{"a", "b"}},
		{"a held cluster takes part", map[string]Participant{"a": {}, "b": {HeldRegion: "us-east-1"}}, []string{"a", "b"}},
		{"an expired or unregistered cluster is out", active("a"), []string{"a"}},
		{"none participates: no import", map[string]Participant{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ex("a", time.Minute, nil)
			a.EndpointGroups = []*registryv1.EndpointGroup{{AddressType: "IPv4"}}
			b := ex("b", time.Hour, func(s *registryv1.ExportSpec) { s.Ports[0].Port = 81 })
			imp := Service(svc, []store.Export{b, a}, tc.clusters)
			if tc.want == nil {
				if imp != nil {
					t.Fatalf("import = %v, want none", imp)
				}
				if v := Verdict(imp, "b"); v.GetParticipating() {
					t.Fatalf("verdict without import = %v", v)
				}
				return
			}
			var ids []string
			for _, c := range imp.GetClusters() {
				ids = append(ids, c.GetClusterId())
			}
			if d := cmp.Diff(tc.want, ids, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("clusters (-want +got):\n%s", d)
			}
			if len(tc.want) == 1 && len(imp.GetConflicts()) != 0 {
				t.Fatalf("a non-participating export caused conflicts %v", imp.GetConflicts())
			}
			if imp.GetClusters()[0].GetEndpointGroups()[0].GetAddressType() != "IPv4" {
				t.Fatal("endpoint groups not carried")
			}
			if v := Verdict(imp, "b"); v.GetParticipating() != (len(tc.want) == 2) {
				t.Fatalf("verdict for b = %v", v)
			}
			for _, c := range imp.GetClusters() {
				region := tc.clusters[c.GetClusterId()].HeldRegion
				held := c.GetLeaseState() == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION
				if c.GetHeldRegion() != region || held != (region != "") {
					t.Fatalf("cluster %s: lease state %v held by %q, want held by %q", c.GetClusterId(), c.GetLeaseState(), c.GetHeldRegion(), region)
				}
			}
		})
	}
}

func TestPortUnion(t *testing.T) {
	a := ex("a", time.Hour, func(s *registryv1.ExportSpec) {
		s.Ports = []*registryv1.ServicePort{port("http", "TCP", 80), port("metrics", "TCP", 9090)}
	})
	b := ex("b", time.Minute, func(s *registryv1.ExportSpec) {
		s.Ports = []*registryv1.ServicePort{port("grpc", "TCP", 9000), port("http", "", 80), port("dns", "UDP", 53)}
	})
	imp := Service(svc, []store.Export{b, a}, active("a", "b"))
	var got []string
	for _, p := range imp.GetSpec().GetPorts() {
		got = append(got, fmt.Sprintf("%s/%s/%d", p.GetName(), p.GetProtocol(), p.GetPort()))
	}
	if want := "[http/TCP/80 metrics/TCP/9090 grpc/TCP/9000 dns/UDP/53]"; fmt.Sprint(got) != want {
		t.Fatalf("ports = %v, want %s", got, want)
	}
	// The sets differ: a PortConflict on both, each naming what its export lacks.
	if d := conflictsDiff([]R{portC}, imp.GetConflicts()); d != "" {
		t.Fatalf("conflicts (-want +got):\n%s", d)
	}
	missing := map[string]string{}
	for _, c := range imp.GetClusters() {
		var ps []string
		for _, p := range c.GetMissingPorts() {
			ps = append(ps, PortString(p))
		}
		missing[c.GetClusterId()] = fmt.Sprint(ps)
		if len(c.GetExcludedPorts()) != 0 {
			t.Fatalf("%s: excluded %v, want none", c.GetClusterId(), c.GetExcludedPorts())
		}
	}
	if want := "map[a:[grpc/TCP/9000 dns/UDP/53] b:[metrics/TCP/9090]]"; fmt.Sprint(missing) != want {
		t.Fatalf("missing ports = %v, want %s", missing, want)
	}
	if v := Verdict(imp, "b"); fmt.Sprint(len(v.GetMissingPorts())) != "1" {
		t.Fatalf("verdict for b = %v", v)
	}
}

// TestExcludedPorts: a port clashing with an older one is left out of the import and named
// on the export that has it.
func TestExcludedPorts(t *testing.T) {
	imp := Service(svc, []store.Export{ex("b", time.Minute, func(s *registryv1.ExportSpec) { s.Ports[0].Port = 81 }), ex("a", time.Hour, nil)}, active("a", "b"))
	var got []string
	for _, c := range imp.GetClusters() {
		for _, p := range c.GetMissingPorts() {
			got = append(got, c.GetClusterId()+" lacks "+PortString(p))
		}
		for _, p := range c.GetExcludedPorts() {
			got = append(got, c.GetClusterId()+" has "+PortString(p))
		}
	}
	if want := "[b lacks http/TCP/80 b has http/TCP/81]"; fmt.Sprint(got) != want {
		t.Fatalf("differences = %v, want %s", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	exports := []store.Export{
		ex("c", time.Hour, func(s *registryv1.ExportSpec) { s.ExportedLabels = map[string]string{"a": "1", "b": "2"} }),
		ex("a", time.Hour, func(s *registryv1.ExportSpec) { s.Ports[0].Port = 81 }),
		ex("b", time.Minute, func(s *registryv1.ExportSpec) { s.Type = headless }),
	}
	first := Service(svc, exports, active("a", "b", "c")).String()
	for i := range 50 {
		// Rotate the input; the answer must not change.
		rot := append(append([]store.Export{}, exports[i%3:]...), exports[:i%3]...)
		if got := Service(svc, rot, active("a", "b", "c")).String(); got != first {
			t.Fatalf("run %d differs:\n%s\n%s", i, got, first)
		}
	}
}

// TestPortSets: the example from the mcs-api rule — the import holds the union and
// every participating export reports PortConflict; the order of ports does not matter.
func TestPortSets(t *testing.T) {
	ports := func(p ...*registryv1.ServicePort) func(*registryv1.ExportSpec) {
		return func(s *registryv1.ExportSpec) { s.Ports = p }
	}
	tests := []struct {
		name      string
		old, newe func(*registryv1.ExportSpec)
		want      []R
		union     string
	}{
		{"tcp/42 udp/42 vs tcp/42 sctp/142",
			ports(port("tcp", "TCP", 42), port("udp", "UDP", 42)), ports(port("tcp", "TCP", 42), port("sctp", "SCTP", 142)),
			[]R{portC}, "[tcp/TCP/42 udp/UDP/42 sctp/SCTP/142]"},
		{"same set, other order",
			ports(port("http", "TCP", 80), port("grpc", "TCP", 9000)), ports(port("grpc", "TCP", 9000), port("http", "TCP", 80)),
			nil, "[http/TCP/80 grpc/TCP/9000]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			imp := Service(svc, []store.Export{ex("b", time.Minute, tc.newe), ex("a", time.Hour, tc.old)}, active("a", "b"))
			if d := conflictsDiff(tc.want, imp.GetConflicts()); d != "" {
				t.Fatalf("conflicts (-want +got):\n%s", d)
			}
			var got []string
			for _, p := range imp.GetSpec().GetPorts() {
				got = append(got, PortString(p))
			}
			if fmt.Sprint(got) != tc.union {
				t.Fatalf("ports = %v, want %s", got, tc.union)
			}
			for _, c := range imp.GetClusters() {
				if d := conflictsDiff(imp.GetConflicts(), c.GetConflicts()); d != "" {
					t.Fatalf("cluster %s reports other conflicts than the import (-import +cluster):\n%s", c.GetClusterId(), d)
				}
			}
		})
	}
}

// TestUnionStaysAValidService: a port that would make the derived Service invalid is left
// out of the union and named on its own export (PortConflict), whichever export came
// first, so one cluster's export cannot poison the import of the others.
func TestUnionStaysAValidService(t *testing.T) {
	ports := func(ps ...*registryv1.ServicePort) func(*registryv1.ExportSpec) {
		return func(s *registryv1.ExportSpec) { s.Ports = ps }
	}
	withApp := func(p *registryv1.ServicePort, app string) *registryv1.ServicePort { p.AppProtocol = app; return p }
	many := func(prefix string, n int, first int32) []*registryv1.ServicePort {
		var out []*registryv1.ServicePort
		for i := range n {
			out = append(out, port(fmt.Sprintf("%s%d", prefix, i), "TCP", first+int32(i)))
		}
		return out
	}
	tests := []struct {
		name       string
		old, new   func(*registryv1.ExportSpec)
		wantPorts  string // the union, as PortString
		wantExcl   string // by cluster: "old" is cluster a (older), "new" is cluster b
		wantReason []R
	}{
		{"unnamed newer port joins no named union", ports(port("http", "TCP", 80)), ports(port("", "TCP", 8080)),
			"[http/TCP/80]", "map[b:[/TCP/8080]]", []R{portC}},
		{"a union holding an unnamed port takes no named one", ports(port("", "TCP", 80)), ports(port("grpc", "TCP", 9000)),
			"[/TCP/80]", "map[b:[grpc/TCP/9000]]", []R{portC}},
		{"the same unnamed port on both is one port", ports(port("", "TCP", 80)), ports(port("", "", 80)),
			"[/TCP/80]", "map[]", nil},
		{"an unnamed port at another number is excluded", ports(port("", "TCP", 80)), ports(port("", "TCP", 81)),
			"[/TCP/80]", "map[b:[/TCP/81]]", []R{portC}},
		{"a stored port with a bad appProtocol does not join", ports(port("http", "TCP", 80)),
			ports(port("http", "TCP", 80), withApp(port("grpc", "TCP", 9000), "Grpc Over TLS!")),
			"[http/TCP/80]", "map[b:[grpc/TCP/9000/Grpc Over TLS!]]", []R{portC}},
		{"a stored oldest port with a bad name does not join", ports(port("HTTP", "TCP", 80)), ports(port("web", "TCP", 81)),
			"[web/TCP/81]", "map[a:[HTTP/TCP/80]]", []R{portC}},
		{"the union holds at most 64 ports", ports(many("a", 64, 1000)...), ports(append(many("a", 64, 1000), port("extra", "TCP", 2000))...),
			"", "map[b:[extra/TCP/2000]]", []R{portC}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			imp := Service(svc, []store.Export{ex("b", time.Minute, tc.new), ex("a", time.Hour, tc.old)}, active("a", "b"))
			var got []string
			for _, p := range imp.GetSpec().GetPorts() {
				got = append(got, PortString(p))
			}
			if tc.wantPorts != "" && fmt.Sprint(got) != tc.wantPorts {
				t.Errorf("union = %v, want %s", got, tc.wantPorts)
			}
			if len(got) > 64 {
				t.Errorf("union has %d ports", len(got))
			}
			excl := map[string][]string{}
			for _, c := range imp.GetClusters() {
				for _, p := range c.GetExcludedPorts() {
					excl[c.GetClusterId()] = append(excl[c.GetClusterId()], PortString(p))
				}
			}
			if fmt.Sprint(excl) != tc.wantExcl {
				t.Errorf("excluded = %v, want %s", excl, tc.wantExcl)
			}
			if d := conflictsDiff(tc.wantReason, imp.GetConflicts()); d != "" {
				t.Errorf("conflicts (-want +got):\n%s", d)
			}
			// Whatever joined, the union is a valid Service's port list.
			for _, p := range imp.GetSpec().GetPorts() {
				if len(imp.GetSpec().GetPorts()) > 1 && p.GetName() == "" {
					t.Errorf("unnamed port %s in a union of %d", PortString(p), len(got))
				}
			}
		})
	}
}

// The import carries the oldest export's locality policy and each cluster's registered
// region: what an importer's tiers need.
func TestLocalityAndRegions(t *testing.T) {
	tests := []struct {
		name      string
		winner    []registryv1.LocalityTier
		other     []registryv1.LocalityTier
		want      []registryv1.LocalityTier
		conflicts []R
	}{
		{"none set", nil, nil, nil, nil},
		{"both cluster,region", []registryv1.LocalityTier{tierC, tierR}, []registryv1.LocalityTier{tierC, tierR}, []registryv1.LocalityTier{tierC, tierR}, nil},
		{"the oldest wins a conflict", []registryv1.LocalityTier{tierR}, []registryv1.LocalityTier{tierC}, []registryv1.LocalityTier{tierR}, []R{locC}},
		{"an oldest without a policy wins too", nil, []registryv1.LocalityTier{tierC}, nil, []R{locC}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := ex("a", time.Hour, func(s *registryv1.ExportSpec) { s.Locality = tc.winner })
			b := ex("b", time.Minute, func(s *registryv1.ExportSpec) { s.Locality = tc.other })
			imp := Service(svc, []store.Export{b, a}, map[string]Participant{"a": {Region: "us-east-1"}, "b": {Region: "eu-west-1", HeldRegion: "us-east-1"}})
			if d := cmp.Diff(tc.want, imp.GetSpec().GetLocality(), cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("locality (-want +got):\n%s", d)
			}
			if d := conflictsDiff(tc.conflicts, imp.GetConflicts()); d != "" {
				t.Fatalf("conflicts (-want +got):\n%s", d)
			}
			regions := map[string]string{}
			for _, c := range imp.GetClusters() {
				regions[c.GetClusterId()] = c.GetRegion()
			}
			if d := cmp.Diff(map[string]string{"a": "us-east-1", "b": "eu-west-1"}, regions); d != "" {
				t.Fatalf("regions (-want +got):\n%s", d)
			}
		})
	}
}
