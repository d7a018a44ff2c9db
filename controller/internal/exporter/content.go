package exporter

import (
	"maps"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Spec returns what the cluster exports of svc: the fields KEP-1645 merges. The caller has
// checked that svc is not ExternalName.
func Spec(svc *corev1.Service, se *mcsv1beta1.ServiceExport) *registryv1.ExportSpec {
	s := &registryv1.ExportSpec{
		Type:            registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
		SessionAffinity: string(svc.Spec.SessionAffinity),
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		s.Type = registryv1.ServiceType_SERVICE_TYPE_HEADLESS
	}
	for _, p := range svc.Spec.Ports {
		sp := &registryv1.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port}
		if sp.Protocol == "" {
			sp.Protocol = string(corev1.ProtocolTCP)
		}
		if p.AppProtocol != nil {
			sp.AppProtocol = *p.AppProtocol
		}
		s.Ports = append(s.Ports, sp)
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && svc.Spec.SessionAffinityConfig != nil &&
		svc.Spec.SessionAffinityConfig.ClientIP != nil && svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != nil {
		s.SessionAffinityConfig = &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: *svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds}
	}
	for _, f := range svc.Spec.IPFamilies {
		s.IpFamilies = append(s.IpFamilies, string(f))
	}
	if svc.Spec.InternalTrafficPolicy != nil {
		s.InternalTrafficPolicy = string(*svc.Spec.InternalTrafficPolicy)
	}
	if svc.Spec.TrafficDistribution != nil {
		s.TrafficDistribution = *svc.Spec.TrafficDistribution
	}
	if len(se.Spec.ExportedLabels) > 0 {
		s.ExportedLabels = maps.Clone(se.Spec.ExportedLabels)
	}
	if len(se.Spec.ExportedAnnotations) > 0 {
		s.ExportedAnnotations = maps.Clone(se.Spec.ExportedAnnotations)
	}
	return s
}

// EndpointGroups returns the endpoints of the Service's EndpointSlices, one group per slice,
// ordered by slice name so that the same slices always give the same groups.
func EndpointGroups(slices []discoveryv1.EndpointSlice) []*registryv1.EndpointGroup {
	sorted := make([]*discoveryv1.EndpointSlice, len(slices))
	for i := range slices {
		sorted[i] = &slices[i]
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []*registryv1.EndpointGroup
	for _, s := range sorted {
		if len(s.Endpoints) == 0 {
			continue
		}
		g := &registryv1.EndpointGroup{AddressType: string(s.AddressType)}
		for _, p := range s.Ports {
			ep := &registryv1.EndpointPort{Protocol: string(corev1.ProtocolTCP)}
			if p.Name != nil {
				ep.Name = *p.Name
			}
			if p.Protocol != nil {
				ep.Protocol = string(*p.Protocol)
			}
			if p.AppProtocol != nil {
				ep.AppProtocol = *p.AppProtocol
			}
			if p.Port != nil {
				ep.Port = *p.Port
			}
			g.Ports = append(g.Ports, ep)
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			re := &registryv1.Endpoint{
				Addresses: canonical(s.AddressType, e.Addresses),
				Conditions: &registryv1.EndpointConditions{
					Ready: e.Conditions.Ready, Serving: e.Conditions.Serving, Terminating: e.Conditions.Terminating,
				},
			}
			if e.Hostname != nil {
				re.Hostname = *e.Hostname
			}
			if e.Zone != nil {
				re.Zone = *e.Zone
			}
			if e.NodeName != nil {
				re.NodeName = *e.NodeName
			}
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				re.TargetPod = e.TargetRef.Name
			}
			g.Endpoints = append(g.Endpoints, re)
		}
		out = append(out, g)
	}
	return out
}

// canonical returns IP addresses in canonical form (an API server may hold an IPv6 address
// written otherwise, which the registry's contract refuses); other addresses as they are.
func canonical(t discoveryv1.AddressType, addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a
		if t == discoveryv1.AddressTypeIPv4 || t == discoveryv1.AddressTypeIPv6 {
			if ip, err := netip.ParseAddr(a); err == nil {
				out[i] = ip.String()
			}
		}
	}
	return out
}
