// Package slicetest builds EndpointSlices the way mcs-controller and Karmada write them,
// for tests of the discovery and of its consumers.
package slicetest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Endpoint describes one endpoint. Ready nil leaves the condition unset.
type Endpoint struct {
	IP       string
	Ready    *bool
	Pod      string
	Hostname string
}

// Bool returns a pointer to b.
func Bool(b bool) *bool { return &b }

// Port is a named port.
type Port struct {
	Name     string
	Port     int32
	Protocol corev1.Protocol
}

func build(ns, name string, lbls, annotations map[string]string, ports []Port, eps []Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: annotations},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &proto})
	}
	for _, e := range eps {
		if len(e.IP) > 0 && e.IP[0] != '[' && containsColon(e.IP) {
			s.AddressType = discoveryv1.AddressTypeIPv6
		}
		ep := discoveryv1.Endpoint{Addresses: []string{e.IP}, Conditions: discoveryv1.EndpointConditions{Ready: e.Ready}}
		if e.Pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.Pod}
		}
		if e.Hostname != "" {
			h := e.Hostname
			ep.Hostname = &h
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func containsColon(s string) bool {
	for _, c := range s {
		if c == ':' {
			return true
		}
	}
	return false
}

// MCS returns a slice as mcs-controller imports it: exported Service service of namespace
// ns from cluster, behind the derived Service derived.
func MCS(cluster, ns, service, derived, suffix string, ports []Port, eps ...Endpoint) *discoveryv1.EndpointSlice {
	return build(ns, fmt.Sprintf("%s-%s%s", derived, cluster, suffix), map[string]string{
		"multicluster.kubernetes.io/service-name":   service,
		"multicluster.kubernetes.io/source-cluster": cluster,
		discoveryv1.LabelServiceName:                derived,
		discoveryv1.LabelManagedBy:                  "mcs-controller.dynamo.nvidia.com",
	}, nil, ports, eps)
}

// Karmada returns a slice as Karmada imports it: named imported-<cluster>-<slice>, labelled
// kubernetes.io/service-name=derived-<service>, annotated work.karmada.io/namespace=karmada-es-<cluster>.
func Karmada(cluster, ns, service, slice string, ports []Port, eps ...Endpoint) *discoveryv1.EndpointSlice {
	return build(ns, fmt.Sprintf("imported-%s-%s", cluster, slice), map[string]string{
		discoveryv1.LabelServiceName: "derived-" + service,
		discoveryv1.LabelManagedBy:   "endpointslice-dispatch-controller.karmada.io",
	}, map[string]string{"work.karmada.io/namespace": "karmada-es-" + cluster}, ports, eps)
}
