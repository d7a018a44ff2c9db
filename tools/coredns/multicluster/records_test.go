package multicluster

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestAnswer(t *testing.T) {
	imports := map[string]*Import{
		"dynamo/relay": {Namespace: "dynamo", Name: "relay", IPs: []string{"10.96.0.20"},
			Ports:     []Port{{Name: "http", Protocol: "TCP", Port: 80}},
			Endpoints: []Endpoint{{ClusterID: "use1-a", Address: "10.200.0.5"}}},
		"global-discovery/router": {Namespace: "global-discovery", Name: "router", Headless: true,
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 8000}},
			Endpoints: []Endpoint{
				{ClusterID: "use1-a", Hostname: "router-0", Address: "10.200.0.7"},
				{ClusterID: "usw2-a", Hostname: "router-0", Address: "10.201.0.4"},
				{ClusterID: "usw2-a", Address: "10.201.0.9"},
			}},
	}
	find := func(ns, name string) *Import { return imports[ns+"/"+name] }
	const zone = "clusterset.local."
	tests := []struct {
		name, qname string
		qtype       uint16
		found       bool
		want        []string // records without their header
	}{
		{"clusterset IP", "relay.dynamo.svc.clusterset.local.", dns.TypeA, true, []string{"10.96.0.20"}},
		{"no IPv6 of an IPv4 import: NODATA", "relay.dynamo.svc.clusterset.local.", dns.TypeAAAA, true, nil},
		{"headless: every ready endpoint", "router.global-discovery.svc.clusterset.local.", dns.TypeA, true, []string{"10.200.0.7", "10.201.0.4", "10.201.0.9"}},
		{"headless endpoint by hostname and cluster", "router-0.usw2-a.router.global-discovery.svc.clusterset.local.", dns.TypeA, true, []string{"10.201.0.4"}},
		{"hostname of another cluster", "router-0.euw1-a.router.global-discovery.svc.clusterset.local.", dns.TypeA, false, nil},
		{"endpoint names only for headless imports", "x.use1-a.relay.dynamo.svc.clusterset.local.", dns.TypeA, false, nil},
		{"SRV of a named port", "_http._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, true, []string{"0 100 80 relay.dynamo.svc.clusterset.local."}},
		{"SRV of a headless import: each named endpoint", "_http._tcp.router.global-discovery.svc.clusterset.local.", dns.TypeSRV, true,
			[]string{"0 100 8000 router-0.use1-a.router.global-discovery.svc.clusterset.local.", "0 100 8000 router-0.usw2-a.router.global-discovery.svc.clusterset.local."}},
		{"SRV of an unknown port: NODATA", "_grpc._tcp.relay.dynamo.svc.clusterset.local.", dns.TypeSRV, true, nil},
		{"not imported", "other.dynamo.svc.clusterset.local.", dns.TypeA, false, nil},
		{"another namespace", "relay.default.svc.clusterset.local.", dns.TypeA, false, nil},
		{"not a service name", "dynamo.svc.clusterset.local.", dns.TypeA, false, nil},
		{"pod names are not served", "relay.dynamo.pod.clusterset.local.", dns.TypeA, false, nil},
		{"another zone", "relay.dynamo.svc.cluster.local.", dns.TypeA, false, nil},
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
			Endpoints: []Endpoint{{ClusterID: "c", Hostname: hostname, Address: address}}}
		_ = Answer(func(string, string) *Import { return imp }, "clusterset.local.", dns.Fqdn(qname), qtype)
	})
}
