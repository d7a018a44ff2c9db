package validate

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// EndpointCount is the number of endpoints in endpoint groups.
func EndpointCount(groups []*registryv1.EndpointGroup) int {
	n := 0
	for _, g := range groups {
		n += len(g.GetEndpoints())
	}
	return n
}

// EndpointGroups checks the endpoints of an export.
func EndpointGroups(errs *Errors, field string, groups []*registryv1.EndpointGroup) {
	if len(groups) > MaxEndpointGroups {
		errs.add(field, "%d groups, at most %d allowed", len(groups), MaxEndpointGroups)
		return
	}
	if total := EndpointCount(groups); total > MaxEndpoints {
		errs.add(field, "%d endpoints, at most %d allowed per export", total, MaxEndpoints)
		return
	}
	for i, g := range groups {
		gf := fmt.Sprintf("%s[%d]", field, i)
		at := g.GetAddressType()
		if at != "IPv4" && at != "IPv6" && at != "FQDN" {
			errs.add(gf+".address_type", "%q must be IPv4, IPv6 or FQDN", at)
		}
		if len(g.GetPorts()) > MaxEndpointPorts {
			errs.add(gf+".ports", "%d ports, at most %d allowed", len(g.GetPorts()), MaxEndpointPorts)
		} else {
			names := make(map[string]bool, len(g.GetPorts()))
			for j, p := range g.GetPorts() {
				pf := fmt.Sprintf("%s.ports[%d]", gf, j)
				portName(errs, pf+".name", p.GetName())
				// Kubernetes: EndpointSlice port names are unique, "" included.
				if names[p.GetName()] {
					errs.add(pf+".name", "duplicate port name %q", p.GetName())
				}
				names[p.GetName()] = true
				protocol(errs, pf+".protocol", p.GetProtocol())
				portNumber(errs, pf+".port", p.GetPort())
				appProtocol(errs, pf+".app_protocol", p.GetAppProtocol())
			}
		}
		for j, e := range g.GetEndpoints() {
			if errs.Full() {
				return
			}
			ef := fmt.Sprintf("%s.endpoints[%d]", gf, j)
			n := len(e.GetAddresses())
			if n == 0 || n > MaxAddressesPerEndpoint {
				errs.add(ef+".addresses", "%d addresses, must be between 1 and %d", n, MaxAddressesPerEndpoint)
			}
			for k, a := range e.GetAddresses() {
				if k >= MaxAddressesPerEndpoint || errs.Full() {
					break
				}
				address(errs, fmt.Sprintf("%s.addresses[%d]", ef, k), at, a)
			}
			if h := e.GetHostname(); h != "" && (len(h) > 63 || !dnsLabel.MatchString(h)) {
				errs.add(ef+".hostname", "%q must be a DNS label of at most 63 characters", h)
			}
			if p := e.GetTargetPod(); p != "" && len(content.IsDNS1123Subdomain(p)) > 0 {
				errs.add(ef+".target_pod", "%q must be a Pod name: a DNS subdomain of at most 253 characters", p)
			}
			if z := e.GetZone(); len(z) > 253 {
				errs.add(ef+".zone", "%d characters, at most 253 allowed", len(z))
			}
			if n := e.GetNodeName(); len(n) > 253 {
				errs.add(ef+".node_name", "%d characters, at most 253 allowed", len(n))
			}
		}
	}
}

// address checks an endpoint address as Kubernetes' EndpointSlice validation does: an IP of
// the group's family in canonical form, not IPv4-mapped, and not unspecified, loopback,
// link-local or link-local multicast (ValidateEndpointIP: such addresses are node-centric,
// 169.254.169.254 is a metadata service); or a fully qualified domain name of at least two
// labels (IsFullyQualifiedDomainName).
func address(errs *Errors, field, addressType, a string) {
	switch addressType {
	case "IPv4", "IPv6":
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil || ip.Zone() != "" || (addressType == "IPv4") != ip.Is4():
			errs.add(field, "%q is not an %s address", a, addressType)
		case ip.Is4In6():
			errs.add(field, "%q must not be an IPv4-mapped IPv6 address", a)
		case ip.String() != a:
			errs.add(field, "%q must be written in canonical form, %q", a, ip.String())
		case ip.IsUnspecified():
			errs.add(field, "%q may not be unspecified", a)
		case ip.IsLoopback():
			errs.add(field, "%q may not be in the loopback range (127.0.0.0/8, ::1/128)", a)
		case ip.IsLinkLocalUnicast():
			errs.add(field, "%q may not be in the link-local range (169.254.0.0/16, fe80::/10)", a)
		case ip.IsLinkLocalMulticast():
			errs.add(field, "%q may not be in the link-local multicast range (224.0.0.0/24, ff02::/16)", a)
		}
	case "FQDN":
		name := strings.TrimSuffix(a, ".")
		switch {
		case len(a) > 253 || len(content.IsDNS1123Subdomain(name)) > 0:
			errs.add(field, "%q is not a DNS name of at most 253 characters", a)
		case !strings.Contains(name, "."):
			errs.add(field, "%q must be a fully qualified domain name of at least two labels", a)
		default:
			for _, label := range strings.Split(name, ".") {
				if len(label) > 63 {
					errs.add(field, "%q has a label of %d characters, at most 63 allowed", a, len(label))
					break
				}
			}
		}
	}
}
