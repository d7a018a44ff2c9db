// Package multicluster is a CoreDNS plugin that answers the clusterset.local names of the
// Kubernetes Multi-Cluster Services API (KEP-1645, the DNS specification of
// kubernetes/enhancements#2577) from the ServiceImports and the imported EndpointSlices of
// the cluster it runs in. It takes the Corefile syntax of github.com/coredns/multicluster
// (`multicluster [ZONES...] { kubeconfig FILE; fallthrough [ZONES...] }`) and reads the
// same objects, so a cluster can run either; this one is built here because that module is
// not served by the Go module proxy these builds use.
package multicluster

import (
	"net"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// Import is what the records of one ServiceImport are made from.
type Import struct {
	Namespace, Name string
	// Headless is spec.type Headless; otherwise ClusterSetIP.
	Headless bool
	// IPs are spec.ips (ClusterSetIP).
	IPs   []string
	Ports []Port
	// Endpoints are the ready endpoints of the import's EndpointSlices (labels
	// multicluster.kubernetes.io/service-name and source-cluster).
	Endpoints []Endpoint
}

// Port is one port of an import.
type Port struct {
	Name     string
	Protocol string // TCP, UDP or SCTP
	Port     int32
}

// Endpoint is one ready address of an imported EndpointSlice.
type Endpoint struct {
	ClusterID string
	Hostname  string
	Address   string
}

// Lookup is the answer to one question: records, or found=false for a name that does not
// exist (NXDOMAIN). A name that exists without records of the type asked is found with
// none (NODATA).
type Lookup struct {
	Records []dns.RR
	Found   bool
}

const ttl = 5

// Answer answers qname/qtype in zone (both lower case and fully qualified) from the
// import that find returns for a namespace and name (nil: none). The names (KEP-1645):
//
//	<svc>.<ns>.svc.<zone>                     A/AAAA: the clusterset IPs, or for a headless
//	                                          import every ready endpoint
//	<hostname>.<cluster>.<svc>.<ns>.svc.<zone> A/AAAA: one endpoint of a headless import
//	_<port>._<proto>.<svc>.<ns>.svc.<zone>    SRV: the named port, at the service name (or,
//	                                          headless, at each endpoint's name)
func Answer(find func(namespace, name string) *Import, zone, qname string, qtype uint16) Lookup {
	rest := strings.TrimSuffix(qname, "."+zone)
	if rest == qname {
		return Lookup{}
	}
	labels := dns.SplitDomainName(rest)
	n := len(labels)
	if n < 3 || labels[n-1] != "svc" {
		return Lookup{}
	}
	imp := find(labels[n-2], labels[n-3])
	if imp == nil {
		return Lookup{}
	}
	svcName := strings.Join(labels[n-3:], ".") + "." + zone
	switch n {
	case 3: // <svc>.<ns>.svc
		var addrs []string
		if imp.Headless {
			for _, e := range imp.Endpoints {
				addrs = append(addrs, e.Address)
			}
		} else {
			addrs = imp.IPs
		}
		return Lookup{Found: true, Records: addresses(qname, qtype, addrs)}
	case 5:
		if strings.HasPrefix(labels[0], "_") && strings.HasPrefix(labels[1], "_") { // _<port>._<proto>.<svc>.<ns>.svc
			return Lookup{Found: true, Records: srv(imp, qname, qtype, labels[0][1:], labels[1][1:], svcName)}
		}
		// <hostname>.<cluster>.<svc>.<ns>.svc
		if !imp.Headless {
			return Lookup{}
		}
		var addrs []string
		for _, e := range imp.Endpoints {
			if strings.EqualFold(e.Hostname, labels[0]) && strings.EqualFold(e.ClusterID, labels[1]) {
				addrs = append(addrs, e.Address)
			}
		}
		if len(addrs) == 0 {
			return Lookup{}
		}
		return Lookup{Found: true, Records: addresses(qname, qtype, addrs)}
	}
	return Lookup{}
}

func srv(imp *Import, qname string, qtype uint16, port, proto, svcName string) []dns.RR {
	var out []dns.RR
	if qtype != dns.TypeSRV {
		return nil
	}
	for _, p := range imp.Ports {
		if !strings.EqualFold(p.Name, port) || !strings.EqualFold(p.Protocol, proto) {
			continue
		}
		hdr := dns.RR_Header{Name: qname, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl}
		if !imp.Headless {
			out = append(out, &dns.SRV{Hdr: hdr, Priority: 0, Weight: 100, Port: uint16(p.Port), Target: svcName})
			continue
		}
		for _, e := range imp.Endpoints {
			if e.Hostname == "" {
				continue
			}
			target := strings.ToLower(e.Hostname + "." + e.ClusterID + "." + svcName)
			out = append(out, &dns.SRV{Hdr: hdr, Priority: 0, Weight: 100, Port: uint16(p.Port), Target: target})
		}
	}
	return out
}

// addresses returns the A (or AAAA) records of the addresses of the family asked, sorted.
func addresses(qname string, qtype uint16, addrs []string) []dns.RR {
	var out []dns.RR
	sorted := append([]string(nil), addrs...)
	sort.Strings(sorted)
	for _, a := range sorted {
		ip := net.ParseIP(a)
		if ip == nil {
			continue
		}
		switch {
		case qtype == dns.TypeA && ip.To4() != nil:
			out = append(out, &dns.A{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip.To4()})
		case qtype == dns.TypeAAAA && ip.To4() == nil:
			out = append(out, &dns.AAAA{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip})
		}
	}
	return out
}
