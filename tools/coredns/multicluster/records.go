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
	"slices"
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
	// Ports are the slice's ports: a headless import's SRV records name them, as the
	// kubernetes plugin does (no proxy maps a Service port to them).
	Ports []Port
	// Inactive: the endpoint is outside the import's active locality tier (mcs-controller
	// hints it for a zone no node has).
	Inactive bool
}

// active returns the endpoints of the import's active locality tier: those not marked
// inactive, or all of them when none is (kube-proxy's own fallback).
func active(endpoints []Endpoint) []Endpoint {
	var out []Endpoint
	for _, e := range endpoints {
		if !e.Inactive {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return endpoints
	}
	return out
}

// Name is the endpoint's label under <cluster>.<svc>.<ns>.svc.<zone>: its hostname, or
// without one its address with dashes ("10-1-2-3", "fd00--1"), as upstream multicluster
// and the kubernetes plugin name pods; "" for an address that is not an IP (FQDN).
func (e Endpoint) Name() string {
	if e.Hostname != "" {
		return strings.ToLower(e.Hostname)
	}
	ip := net.ParseIP(e.Address)
	if ip == nil {
		return ""
	}
	if v4 := ip.To4(); v4 != nil {
		return strings.ReplaceAll(v4.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.String(), ":", "-")
}

// Lookup is the answer to one question: records (and the addresses of their targets, for
// the additional section), or found=false for a name that does not exist (NXDOMAIN). A
// name that exists without records of the type asked is found with none (NODATA).
type Lookup struct {
	Records []dns.RR
	Extra   []dns.RR
	Found   bool
}

const ttl = 5

// Answer answers qname/qtype in zone (both lower case and fully qualified) from the
// import that find returns for a namespace and name (nil: none). The names (KEP-1645, and
// the forms upstream multicluster and the kubernetes plugin answer):
//
//	<svc>.<ns>.svc.<zone>                  A/AAAA: the clusterset IPs, or for a headless
//	                                       import every ready endpoint of its active
//	                                       locality tier. SRV: every port (as
//	                                       _<port>._<proto> with both "any"), each
//	                                       (port, target) once.
//	_<port>._<proto>.<svc>.<ns>.svc.<zone> SRV: the port named, at the service name, or for
//	                                       a headless import at each endpoint's name; "*"
//	                                       or "any" (no underscore) for either matches all.
//	                                       NXDOMAIN when no port matches.
//	<endpoint>.<cluster>.<svc>.<ns>.svc.<zone>
//	                                       A/AAAA: one endpoint of a headless import, by
//	                                       hostname or dashed address (Endpoint.Name).
//	                                       SRV: its ports.
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
	// The service's names answer from the import's active locality tier (a copy: the
	// caller's import is not changed); an endpoint's own name answers whatever its tier.
	view := *imp
	tier := &view
	tier.Endpoints = active(imp.Endpoints)
	svcName := strings.Join(labels[n-3:], ".") + "." + zone
	switch n {
	case 3: // <svc>.<ns>.svc
		switch qtype {
		case dns.TypeSRV:
			return srv(tier, qname, "*", "*", svcName)
		case dns.TypeA, dns.TypeAAAA:
			var addrs []string
			if imp.Headless {
				for _, e := range tier.Endpoints {
					addrs = append(addrs, e.Address)
				}
			} else {
				addrs = imp.IPs
			}
			return Lookup{Found: true, Records: addresses(qname, qtype, addrs)}
		}
		return Lookup{Found: true}
	case 5:
		if port, proto, ok := portLabels(labels[0], labels[1]); ok { // _<port>._<proto>.<svc>.<ns>.svc
			l := srv(tier, qname, port, proto, svcName)
			if qtype != dns.TypeSRV {
				l.Records, l.Extra = nil, nil
			}
			return l
		}
		// <endpoint>.<cluster>.<svc>.<ns>.svc
		if !imp.Headless {
			return Lookup{}
		}
		var found []Endpoint
		for _, e := range imp.Endpoints {
			if name := e.Name(); name != "" && name == labels[0] && strings.EqualFold(e.ClusterID, labels[1]) {
				found = append(found, e)
			}
		}
		if len(found) == 0 {
			return Lookup{}
		}
		if qtype == dns.TypeSRV {
			return endpointSRV(qname, found)
		}
		addrs := make([]string, len(found))
		for i, e := range found {
			addrs[i] = e.Address
		}
		return Lookup{Found: true, Records: addresses(qname, qtype, addrs)}
	}
	return Lookup{}
}

// portLabels reads the first two labels of a port name: "_http" "_tcp", or "*" or "any"
// (without an underscore) for any port or protocol.
func portLabels(port, proto string) (string, string, bool) {
	read := func(l string) (string, bool) {
		switch {
		case l == "*" || l == "any":
			return "*", true
		case len(l) > 1 && l[0] == '_':
			return l[1:], true
		}
		return "", false
	}
	p, ok1 := read(port)
	q, ok2 := read(proto)
	return p, q, ok1 && ok2
}

func matches(pattern, v string) bool { return pattern == "*" || strings.EqualFold(pattern, v) }

// srv is the SRV answer of the ports matching port and proto ("*": any): at the service
// name, or for a headless import at each ready endpoint's name, with the targets'
// addresses; NXDOMAIN when no port matches, as upstream.
func srv(imp *Import, qname, port, proto, svcName string) Lookup {
	type target struct {
		port uint16
		name string
		addr []string
	}
	var targets []target
	if !imp.Headless {
		for _, p := range imp.Ports {
			if matches(port, p.Name) && matches(proto, p.Protocol) {
				targets = append(targets, target{uint16(p.Port), svcName, imp.IPs}) //nolint:gosec // G115: ports are 1–65535 (importFrom, slicePorts).
			}
		}
	} else {
		for _, e := range imp.Endpoints {
			name := e.Name()
			for _, p := range e.Ports {
				if name != "" && matches(port, p.Name) && matches(proto, p.Protocol) {
					targets = append(targets, target{uint16(p.Port), strings.ToLower(name + "." + e.ClusterID + "." + svcName), []string{e.Address}}) //nolint:gosec // G115: ports are 1–65535.
				}
			}
		}
		if len(targets) == 0 {
			// A port of the import matches but no endpoint is ready: the name exists.
			for _, p := range imp.Ports {
				if matches(port, p.Name) && matches(proto, p.Protocol) {
					return Lookup{Found: true}
				}
			}
		}
	}
	if len(targets) == 0 {
		return Lookup{}
	}
	sort.Slice(targets, func(i, j int) bool {
		if targets[i].name != targets[j].name {
			return targets[i].name < targets[j].name
		}
		return targets[i].port < targets[j].port
	})
	// An answer is an RRset without duplicates (RFC 2181 §5.2): a port number served on
	// both TCP and UDP is one SRV record at a name that matches either protocol.
	targets = slices.CompactFunc(targets, func(a, b target) bool { return a.name == b.name && a.port == b.port })
	l := Lookup{Found: true}
	weight := uint16(max(100/len(targets), 1)) //nolint:gosec // G115: 1 to 100.
	extra := map[string]bool{}
	hdr := dns.RR_Header{Name: qname, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl}
	for _, t := range targets {
		l.Records = append(l.Records, &dns.SRV{Hdr: hdr, Priority: 0, Weight: weight, Port: t.port, Target: t.name})
		if !extra[t.name] {
			extra[t.name] = true
			l.Extra = append(l.Extra, addresses(t.name, dns.TypeA, t.addr)...)
			l.Extra = append(l.Extra, addresses(t.name, dns.TypeAAAA, t.addr)...)
		}
	}
	return l
}

// endpointSRV is the SRV answer at one endpoint's name: its ports.
func endpointSRV(qname string, endpoints []Endpoint) Lookup {
	l := Lookup{Found: true}
	hdr := dns.RR_Header{Name: qname, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl}
	var addrs []string
	seen := map[int32]bool{}
	for _, e := range endpoints {
		addrs = append(addrs, e.Address)
		for _, p := range e.Ports {
			if seen[p.Port] {
				continue // one record per port number (RFC 2181 §5.2)
			}
			seen[p.Port] = true
			l.Records = append(l.Records, &dns.SRV{Hdr: hdr, Priority: 0, Weight: 100, Port: uint16(p.Port), Target: qname}) //nolint:gosec // G115: ports are 1–65535.
		}
	}
	if len(l.Records) > 0 {
		l.Extra = append(addresses(qname, dns.TypeA, addrs), addresses(qname, dns.TypeAAAA, addrs)...)
	}
	return l
}

// addresses returns the A (or AAAA) records of the addresses of the family asked, sorted.
func addresses(qname string, qtype uint16, addrs []string) []dns.RR {
	var out []dns.RR
	sorted := append([]string(nil), addrs...)
	sort.Strings(sorted)
	sorted = slices.Compact(sorted)
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
