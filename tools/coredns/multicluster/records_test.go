package multicluster

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestAnswer(t *testing.T) {
	http := []Port{{Name: "http", Protocol: "TCP", Port: 8000}}
	imports := map[string]*Import{
		"dynamo/relay": {Namespace: "dynamo", Name: "relay", IPs: []string{"10.96.0.20"},
			Ports:     []Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "metrics", Protocol: "TCP", Port: 9090}},
			Endpoints: []Endpoint{{ClusterID: "use1-a", Address: "10.200.0.5"}}},
		"global-discovery/router": {Namespace: "global-discovery", Name: "router", Headless: true,
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}, // the Service's port; SRV names the endpoints' 8000
			Endpoints: []Endpoint{
				{ClusterID: "use1-a", Hostname: "router-0", Address: "10.200.0.7", Ports: http},
				{ClusterID: "usw2-a", Hostname: "router-0", Address: "10.201.0.4", Ports: http},
				{ClusterID: "usw2-a", Address: "10.201.0.9", Ports: http},
				{ClusterID: "usw2-a", Address: "fd00::9", Ports: http},
			}},
		"dynamo/idle": {Namespace: "dynamo", Name: "idle", Headless: true, Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}},
		// The same port number on TCP and UDP, as DNS servers export.
		"kube-system/dns": {Namespace: "kube-system", Name: "dns", IPs: []string{"10.96.0.10"},
			Ports: []Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns-tcp", Protocol: "TCP", Port: 53}}},
		"kube-system/dns-headless": {Namespace: "kube-system", Name: "dns-headless", Headless: true,
			Ports:     []Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns-tcp", Protocol: "TCP", Port: 53}},
			Endpoints: []Endpoint{{ClusterID: "use1-a", Address: "10.200.0.53", Ports: []Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns-tcp", Protocol: "TCP", Port: 53}}}}},
		// Locality: use1-a's endpoint is in the active tier, the others are hinted away.
		"dynamo/near": {Namespace: "dynamo", Name: "near", Headless: true, Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}},
			Endpoints: []Endpoint{
				{ClusterID: "use1-a", Address: "10.200.0.8", Ports: http},
				{ClusterID: "euw1-a", Address: "10.202.0.8", Ports: http, Inactive: true},
			}},
		"dynamo/far": {Namespace: "dynamo", Name: "far", Headless: true, Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}},
			Endpoints: []Endpoint{{ClusterID: "euw1-a", Address: "10.202.0.9", Ports: http, Inactive: true}}},
	}
	find := func(ns, name string) *Import { return imports[ns+"/"+name] }
	const zone = "clusterset.local."
	const router = "router.global-discovery.svc.clusterset.local."
	tests := []struct {
		name, qname string
		qtype       uint16
		found       bool
		want        []string // records without their header
		extra       []string // the additional section, names and data
	}{
		{"clusterset IP", "relay.dynamo.svc.clusterset.local.", dns.TypeA, true, []string{"10.96.0.20"}, nil},
		{"no IPv6 of an IPv4 import: NODATA", "relay.dynamo.svc.clusterset.local.", dns.TypeAAAA, true, nil, nil},
		{"TXT of a name that exists: NODATA", "relay.dynamo.svc.clusterset.local.", dns.TypeTXT, true, nil, nil},
		{"headless: every ready endpoint", router, dns.TypeA, true, []string{"10.200.0.7", "10.201.0.4", "10.201.0.9"}, nil},
		{"headless, IPv6", router, dns.TypeAAAA, true, []string{"fd00::9"}, nil},
		{"headless endpoint by hostname and cluster", "router-0.usw2-a." + router, dns.TypeA, true, []string{"10.201.0.4"}, nil},
		{"headless endpoint without a hostname, by its dashed address", "10-201-0-9.usw2-a." + router, dns.TypeA, true, []string{"10.201.0.9"}, nil},
		{"dashed IPv6 address", "fd00--9.usw2-a." + router, dns.TypeAAAA, true, []string{"fd00::9"}, nil},
		{"an endpoint with a hostname is not named by its address", "10-201-0-4.usw2-a." + router, dns.TypeA, false, nil, nil},
		{"SRV at an endpoint's name: its ports", "10-201-0-9.usw2-a." + router, dns.TypeSRV, true, []string{"0 100 8000 10-201-0-9.usw2-a." + router},
			[]string{"10-201-0-9.usw2-a." + router + " 10.201.0.9"}},
		{"hostname of another cluster", "router-0.euw1-a." + router, dns.TypeA, false, nil, nil},
		{"endpoint names only for headless imports", "x.use1-a.relay.dynamo.svc.clusterset.local.", dns.TypeA, false, nil, nil},
		{"SRV of a named port", "_http._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, true, []string{"0 100 80 relay.dynamo.svc.clusterset.local."},
			[]string{"relay.dynamo.svc.clusterset.local. 10.96.0.20"}},
		{"SRV at the bare name: every port", "relay.dynamo.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 50 80 relay.dynamo.svc.clusterset.local.", "0 50 9090 relay.dynamo.svc.clusterset.local."},
			[]string{"relay.dynamo.svc.clusterset.local. 10.96.0.20"}},
		{"SRV with any port", "*._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 50 80 relay.dynamo.svc.clusterset.local.", "0 50 9090 relay.dynamo.svc.clusterset.local."},
			[]string{"relay.dynamo.svc.clusterset.local. 10.96.0.20"}},
		{"SRV of a headless import: each endpoint, by hostname or dashed address, its port", "_http._tcp." + router, dns.TypeSRV, true,
			[]string{"0 25 8000 10-201-0-9.usw2-a." + router, "0 25 8000 fd00--9.usw2-a." + router, "0 25 8000 router-0.use1-a." + router, "0 25 8000 router-0.usw2-a." + router},
			[]string{"10-201-0-9.usw2-a." + router + " 10.201.0.9", "fd00--9.usw2-a." + router + " fd00::9", "router-0.use1-a." + router + " 10.200.0.7", "router-0.usw2-a." + router + " 10.201.0.4"}},
		{"SRV at a headless import's bare name", router, dns.TypeSRV, true,
			[]string{"0 25 8000 10-201-0-9.usw2-a." + router, "0 25 8000 fd00--9.usw2-a." + router, "0 25 8000 router-0.use1-a." + router, "0 25 8000 router-0.usw2-a." + router},
			[]string{"10-201-0-9.usw2-a." + router + " 10.201.0.9", "fd00--9.usw2-a." + router + " fd00::9", "router-0.use1-a." + router + " 10.200.0.7", "router-0.usw2-a." + router + " 10.201.0.4"}},
		{"SRV of a headless import without ready endpoints: NODATA", "_http._tcp.idle.dynamo.svc.clusterset.local.", dns.TypeSRV, true, nil, nil},
		{"SRV of an unknown port: NXDOMAIN, as upstream", "_grpc._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, false, nil, nil},
		{"SRV of another protocol: NXDOMAIN", "_http._udp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, false, nil, nil},
		{"A at a port name that exists: NODATA", "_http._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeA, true, nil, nil},
		{"one SRV record for a port on TCP and UDP (RFC 2181)", "dns.kube-system.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 100 53 dns.kube-system.svc.clusterset.local."}, []string{"dns.kube-system.svc.clusterset.local. 10.96.0.10"}},
		{"one SRV record for a port on TCP and UDP, headless", "dns-headless.kube-system.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 100 53 10-200-0-53.use1-a.dns-headless.kube-system.svc.clusterset.local."},
			[]string{"10-200-0-53.use1-a.dns-headless.kube-system.svc.clusterset.local. 10.200.0.53"}},
		{"one SRV record at an endpoint's name for a port on TCP and UDP", "10-200-0-53.use1-a.dns-headless.kube-system.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 100 53 10-200-0-53.use1-a.dns-headless.kube-system.svc.clusterset.local."},
			[]string{"10-200-0-53.use1-a.dns-headless.kube-system.svc.clusterset.local. 10.200.0.53"}},
		{"headless: the active tier only", "near.dynamo.svc.clusterset.local.", dns.TypeA, true, []string{"10.200.0.8"}, nil},
		{"headless SRV: the active tier only", "_http._tcp.near.dynamo.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 100 8000 10-200-0-8.use1-a.near.dynamo.svc.clusterset.local."},
			[]string{"10-200-0-8.use1-a.near.dynamo.svc.clusterset.local. 10.200.0.8"}},
		{"an endpoint outside the tier keeps its own name", "10-202-0-8.euw1-a.near.dynamo.svc.clusterset.local.", dns.TypeA, true, []string{"10.202.0.8"}, nil},
		{"no endpoint in the tier: every endpoint", "far.dynamo.svc.clusterset.local.", dns.TypeA, true, []string{"10.202.0.9"}, nil},
		{"not imported", "other.dynamo.svc.clusterset.local.", dns.TypeA, false, nil, nil},
		{"another namespace", "relay.default.svc.clusterset.local.", dns.TypeA, false, nil, nil},
		{"not a service name", "dynamo.svc.clusterset.local.", dns.TypeA, false, nil, nil},
		{"pod names are not served", "relay.dynamo.pod.clusterset.local.", dns.TypeA, false, nil, nil},
		{"another zone", "relay.dynamo.svc.cluster.local.", dns.TypeA, false, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Answer(find, zone, tc.qname, tc.qtype)
			if got.Found != tc.found {
				t.Fatalf("found = %v, want %v", got.Found, tc.found)
			}
			var rdata []string
			for _, rr := range got.Records {
				if rr.Header().Name != tc.qname {
					t.Errorf("record name %q, want %q", rr.Header().Name, tc.qname)
				}
				rdata = append(rdata, strings.TrimPrefix(rr.String(), rr.Header().String()))
			}
			if strings.Join(rdata, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("records %q, want %q", rdata, tc.want)
			}
			var extra []string
			for _, rr := range got.Extra {
				extra = append(extra, rr.Header().Name+" "+strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String())))
			}
			if strings.Join(extra, "|") != strings.Join(tc.extra, "|") {
				t.Fatalf("additional %q, want %q", extra, tc.extra)
			}
		})
	}
}

// FuzzAnswer: whatever an import holds that the registry accepts and the API server stores
// (FQDN addresses, endpoints without a hostname, unnamed ports, upper-case names) and
// whatever a client asks, an answer never panics.
func FuzzAnswer(f *testing.F) {
	f.Add("router", "router-0", "backend.example.com.", "", "_http._tcp.router.dynamo.svc.clusterset.local.", uint16(dns.TypeSRV), true)
	f.Add("relay", "", "fd00::1", "http", "relay.dynamo.svc.clusterset.local.", uint16(dns.TypeAAAA), false)
	f.Add("relay", "X", "10.1.2.3", "", "x.c.relay.dynamo.svc.clusterset.local.", uint16(dns.TypeA), true)
	f.Fuzz(func(t *testing.T, name, hostname, address, portName, qname string, qtype uint16, headless bool) {
		imp := &Import{Namespace: "dynamo", Name: name, Headless: headless, IPs: []string{"10.96.0.1"},
			Ports:     []Port{{Name: portName, Protocol: "TCP", Port: 80}},
			Endpoints: []Endpoint{{ClusterID: "c", Hostname: hostname, Address: address, Ports: []Port{{Name: portName, Protocol: "TCP", Port: 8000}}}}}
		_ = Answer(func(string, string) *Import { return imp }, "clusterset.local.", dns.Fqdn(qname), qtype)
	})
}
