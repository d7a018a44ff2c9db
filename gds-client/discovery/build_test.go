package discovery_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
	st "github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery/slicetest"
)

var (
	relayPorts  = []st.Port{{Name: "http", Port: 8080}}
	routerPorts = []st.Port{{Name: "metrics", Port: 9100}, {Name: "http", Port: 8000}}
	mcsCfg      = discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: "global-discovery", RouterService: "global-router", RouterPortName: "http"}
)

func relay(cluster, dgd string, eps ...st.Endpoint) *discoveryv1.EndpointSlice {
	return st.MCS(cluster, "dynamo", dgd+"-pool-relay", "derived-abc", "", relayPorts, eps...)
}

func router(cluster string, eps ...st.Endpoint) *discoveryv1.EndpointSlice {
	return st.MCS(cluster, "global-discovery", "global-router", "derived-xyz", "", routerPorts, eps...)
}

// located labels a slice as mcs-controller does with its source's region and tier.
func located(s *discoveryv1.EndpointSlice, region, tier string) *discoveryv1.EndpointSlice {
	s.Labels[discovery.LabelSourceRegion] = region
	s.Labels[discovery.LabelLocalityTier] = tier
	return s
}

func summary(s discovery.Snapshot) string {
	var parts []string
	for _, p := range s.Pools {
		var addrs []string
		for _, e := range p.Endpoints {
			addrs = append(addrs, fmt.Sprintf("%s:%v", e.Address, e.Ready))
		}
		where := ""
		if p.Region != "" || p.Tier != "" {
			where = fmt.Sprintf(" region=%s tier=%s", p.Region, p.Tier)
		}
		parts = append(parts, fmt.Sprintf("pool %s/%s/%s %v%s", p.Key.ClusterID, p.Key.Namespace, p.Key.DGDName, addrs, where))
	}
	for _, r := range s.Routers {
		parts = append(parts, "router "+r.ID+" "+r.URL)
	}
	return strings.Join(parts, "; ")
}

func TestBuild(t *testing.T) {
	yes, no := st.Bool(true), st.Bool(false)
	tests := []struct {
		name   string
		cfg    discovery.Config
		slices []*discoveryv1.EndpointSlice
		want   string
		issues int
	}{
		{"one pool per cluster", mcsCfg, []*discoveryv1.EndpointSlice{
			relay("usw2-a", "my-dgd", st.Endpoint{IP: "10.2.0.1", Ready: yes}),
			relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.1", Ready: yes}, st.Endpoint{IP: "10.1.0.2", Ready: no}),
		}, "pool use1-a/dynamo/my-dgd [10.1.0.1:true 10.1.0.2:false]; pool usw2-a/dynamo/my-dgd [10.2.0.1:true]", 0},
		{"no ready endpoint: not a pool", mcsCfg, []*discoveryv1.EndpointSlice{
			relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.1", Ready: no}),
		}, "", 0},
		{"ready unset counts as ready", mcsCfg, []*discoveryv1.EndpointSlice{
			relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.1"}),
		}, "pool use1-a/dynamo/my-dgd [10.1.0.1:true]", 0},
		{"a Service without the suffix is no pool", mcsCfg, []*discoveryv1.EndpointSlice{
			st.MCS("use1-a", "dynamo", "my-dgd-frontend", "derived-f", "", relayPorts, st.Endpoint{IP: "10.1.0.1"}),
			st.MCS("use1-a", "dynamo", "-pool-relay", "derived-g", "", relayPorts, st.Endpoint{IP: "10.1.0.2"}),
		}, "", 0},
		{"custom suffix", discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: "x", RouterService: "y", RouterPortName: "z", PoolServiceSuffix: "-relay"}, []*discoveryv1.EndpointSlice{
			st.MCS("use1-a", "dynamo", "my-dgd-relay", "derived-r", "", relayPorts, st.Endpoint{IP: "10.1.0.1"}),
		}, "pool use1-a/dynamo/my-dgd [10.1.0.1:true]", 0},
		{"the same pool split over two slices", mcsCfg, []*discoveryv1.EndpointSlice{
			relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.2", Ready: no}),
			st.MCS("use1-a", "dynamo", "my-dgd-pool-relay", "derived-abc", "-2", relayPorts, st.Endpoint{IP: "10.1.0.1", Ready: yes}, st.Endpoint{IP: "10.1.0.2", Ready: no}),
		}, "pool use1-a/dynamo/my-dgd [10.1.0.1:true 10.1.0.2:false]", 0},
		{"routers: ready only, pod name, hostname, address, IPv6 bracketed", mcsCfg, []*discoveryv1.EndpointSlice{
			router("use1-a",
				st.Endpoint{IP: "10.1.1.1", Ready: yes, Pod: "global-router-0"},
				st.Endpoint{IP: "10.1.1.2", Hostname: "global-router-1"},
				st.Endpoint{IP: "10.1.1.3", Ready: no, Pod: "global-router-2"}),
			router("usw2-a", st.Endpoint{IP: "fd00::5", Ready: yes}),
		}, "router use1-a/global-router-0 http://10.1.1.1:8000; router use1-a/global-router-1 http://10.1.1.2:8000; router usw2-a/fd00::5 http://[fd00::5]:8000", 0},
		{"router port name missing: no routers and a problem", discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: "global-discovery", RouterService: "global-router", RouterPortName: "grpc"}, []*discoveryv1.EndpointSlice{
			router("use1-a", st.Endpoint{IP: "10.1.1.1", Ready: yes}),
		}, "", 1},
		{"router port must be TCP", mcsCfg, []*discoveryv1.EndpointSlice{
			st.MCS("use1-a", "global-discovery", "global-router", "derived-xyz", "", []st.Port{{Name: "http", Port: 8000, Protocol: corev1.ProtocolUDP}}, st.Endpoint{IP: "10.1.1.1"}),
		}, "", 1},
		{"router in another namespace is not the router", mcsCfg, []*discoveryv1.EndpointSlice{
			st.MCS("use1-a", "other", "global-router", "derived-xyz", "", routerPorts, st.Endpoint{IP: "10.1.1.1"}),
		}, "", 0},
		{"a slice moved to another source cluster counts for that cluster", mcsCfg, []*discoveryv1.EndpointSlice{
			func() *discoveryv1.EndpointSlice {
				s := relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.1"})
				s.Labels[discovery.LabelSourceCluster] = "euw1-a"
				return s
			}(),
		}, "pool euw1-a/dynamo/my-dgd [10.1.0.1:true]", 0},
		{"each pool's region and tier, as the importer labels them", mcsCfg, []*discoveryv1.EndpointSlice{
			located(relay("use1-a", "my-dgd", st.Endpoint{IP: "10.1.0.1"}), "us-east-1", "cluster"),
			located(relay("use1-b", "my-dgd", st.Endpoint{IP: "10.4.0.1"}), "us-east-1", "region"),
			located(relay("euw1-a", "my-dgd", st.Endpoint{IP: "10.3.0.1"}), "eu-west-1", "any"),
		}, "pool euw1-a/dynamo/my-dgd [10.3.0.1:true] region=eu-west-1 tier=any; pool use1-a/dynamo/my-dgd [10.1.0.1:true] region=us-east-1 tier=cluster; pool use1-b/dynamo/my-dgd [10.4.0.1:true] region=us-east-1 tier=region", 0},
		{"slices of other modes are ignored", mcsCfg, []*discoveryv1.EndpointSlice{
			st.Karmada("use1-a", "dynamo", "my-dgd-pool-relay", "abc", relayPorts, st.Endpoint{IP: "10.1.0.1"}),
		}, "", 0},
		{"karmada mode", discovery.Config{Mode: discovery.ModeKarmada, RouterNamespace: "global-discovery", RouterService: "global-router", RouterPortName: "http"}, []*discoveryv1.EndpointSlice{
			st.Karmada("use1-a", "dynamo", "my-dgd-pool-relay", "abc", relayPorts, st.Endpoint{IP: "10.1.0.1", Ready: yes}),
			st.Karmada("usw2-a", "global-discovery", "global-router", "def", routerPorts, st.Endpoint{IP: "10.2.1.1", Pod: "global-router-0"}),
			relay("euw1-a", "my-dgd", st.Endpoint{IP: "10.3.0.1"}),
		}, "pool use1-a/dynamo/my-dgd [10.1.0.1:true]; router usw2-a/global-router-0 http://10.2.1.1:8000", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := discovery.Build(tc.cfg, tc.slices)
			if got := summary(snap); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if len(snap.Problems) != tc.issues {
				t.Fatalf("problems = %v, want %d", snap.Problems, tc.issues)
			}
			// Stable: reversing the input changes nothing.
			rev := make([]*discoveryv1.EndpointSlice, len(tc.slices))
			for i, s := range tc.slices {
				rev[len(rev)-1-i] = s
			}
			a, _ := json.Marshal(snap)
			b, _ := json.Marshal(discovery.Build(tc.cfg, rev))
			if string(a) != string(b) {
				t.Fatalf("order-dependent:\n%s\n%s", a, b)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  discovery.Config
		want string
	}{
		{mcsCfg, ""},
		{discovery.Config{Mode: discovery.ModeKarmada}, ""},
		{discovery.Config{Mode: "istio"}, `pool discovery "istio": must be mcs or karmada`},
		{discovery.Config{Mode: discovery.ModeMCS, RouterService: "r", RouterPortName: "p"}, "router namespace (--router-namespace) is required"},
		{discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: "n", RouterPortName: "p"}, "router service (--router-service) is required"},
		{discovery.Config{Mode: discovery.ModeMCS, RouterNamespace: "n", RouterService: "r"}, "router port name (--router-port-name) is required"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// BenchmarkBuild10kSlices builds a snapshot from 10,000 imported slices of 100 clusters:
// 100 pools per cluster with one 10-endpoint slice each (docs/gds-client.md).
func BenchmarkBuild10kSlices(b *testing.B) {
	var slices []*discoveryv1.EndpointSlice
	for c := range 100 {
		cluster := fmt.Sprintf("cluster-%03d", c)
		for p := range 99 {
			var eps []st.Endpoint
			for e := range 10 {
				eps = append(eps, st.Endpoint{IP: fmt.Sprintf("10.%d.%d.%d", c, p, e), Ready: st.Bool(e%4 != 0), Pod: fmt.Sprintf("relay-%d-%d", p, e)})
			}
			slices = append(slices, st.MCS(cluster, "dynamo", fmt.Sprintf("dgd-%02d-pool-relay", p), "derived-x", "", relayPorts, eps...))
		}
		slices = append(slices, router(cluster, st.Endpoint{IP: fmt.Sprintf("10.%d.200.1", c), Pod: "global-router-0"}))
	}
	b.ReportAllocs()
	for b.Loop() {
		if s := discovery.Build(mcsCfg, slices); len(s.Pools) != 9900 || len(s.Routers) != 100 {
			b.Fatalf("pools %d routers %d", len(s.Pools), len(s.Routers))
		}
	}
}
