package importer

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// Names and labels of imported objects.
const (
	// MaxEndpointsPerSlice is the usual EndpointSlice size.
	MaxEndpointsPerSlice = 100
)

// DerivedName is the name of the derived Service of namespace/name: "derived-" and the first
// 10 characters of the lower-case base32hex SHA-256 of "<namespace>/<name>". It is short and
// stable, so every Service name up to 63 characters works.
func DerivedName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "derived-" + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:10]
}

func importType(t registryv1.ServiceType) mcsv1beta1.ServiceImportType {
	if t == registryv1.ServiceType_SERVICE_TYPE_HEADLESS {
		return mcsv1beta1.Headless
	}
	return mcsv1beta1.ClusterSetIP
}

// ImportSpec is the ServiceImport spec of an import (without spec.ips, which come from
// the derived Service).
func ImportSpec(imp *registryv1.ServiceImport) mcsv1beta1.ServiceImportSpec {
	s := imp.GetSpec()
	spec := mcsv1beta1.ServiceImportSpec{
		Type:            importType(s.GetType()),
		SessionAffinity: corev1.ServiceAffinity(s.GetSessionAffinity()),
		Ports:           []mcsv1beta1.ServicePort{},
	}
	for _, p := range s.GetPorts() {
		sp := mcsv1beta1.ServicePort{Name: p.GetName(), Protocol: corev1.Protocol(p.GetProtocol()), Port: p.GetPort()}
		if p.GetAppProtocol() != "" {
			ap := p.GetAppProtocol()
			sp.AppProtocol = &ap
		}
		spec.Ports = append(spec.Ports, sp)
	}
	if c := s.GetSessionAffinityConfig(); c != nil {
		t := c.GetClientIpTimeoutSeconds()
		spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &t}}
	}
	for _, f := range s.GetIpFamilies() {
		spec.IPFamilies = append(spec.IPFamilies, corev1.IPFamily(f))
	}
	if p := s.GetInternalTrafficPolicy(); p != "" {
		itp := corev1.ServiceInternalTrafficPolicy(p)
		spec.InternalTrafficPolicy = &itp
	}
	if td := s.GetTrafficDistribution(); td != "" {
		spec.TrafficDistribution = &td
	}
	return spec
}

// ImportLabels and ImportAnnotations are the ServiceImport's metadata: the exported labels
// and annotations of the winning export, and this controller's marks.
func ImportLabels(imp *registryv1.ServiceImport) map[string]string {
	l := maps.Clone(imp.GetSpec().GetLabels())
	if l == nil {
		l = map[string]string{}
	}
	l[names.ManagedByLabel] = names.ManagedBy
	return l
}

// ImportAnnotations returns the annotations of an imported object: see ImportLabels.
func ImportAnnotations(imp *registryv1.ServiceImport) map[string]string {
	a := maps.Clone(imp.GetSpec().GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a[names.DerivedServiceAnnotation] = DerivedName(imp.GetService().GetNamespace(), imp.GetService().GetName())
	return a
}

// Desired is everything an import asks of this cluster, computed once per reconcile: the
// ServiceImport's spec and metadata, its derived Service and the EndpointSlices (owner
// references are set when the owners exist), and the source clusters for its status.
type Desired struct {
	Spec        mcsv1beta1.ServiceImportSpec
	Labels      map[string]string
	Annotations map[string]string
	Service     *corev1.Service
	Slices      []*discoveryv1.EndpointSlice
	// Clusters are the source clusters, in the registry's order (by cluster id).
	Clusters []string
	// Headless: the import has no ClusterSet IP.
	Headless bool
	// ReplicationHeld are the source clusters the registry holds while replication from
	// the region of their last renewal lags (LEASE_STATE_HELD_REPLICATION), with that region.
	ReplicationHeld []HeldCluster
	// Locality is the active tier; the slices carry its hints (see Hint).
	Locality locality.Decision
}

// HeldCluster is a source cluster the registry holds, and the region that holds it.
type HeldCluster struct {
	ClusterID, Region string
}

// DesiredFor computes the Desired objects of an import.
func DesiredFor(imp *registryv1.ServiceImport) Desired {
	spec := ImportSpec(imp)
	d := Desired{
		Spec: spec, Labels: ImportLabels(imp), Annotations: ImportAnnotations(imp),
		Service: DerivedService(imp, spec), Slices: EndpointSlices(imp),
		Headless: imp.GetSpec().GetType() == registryv1.ServiceType_SERVICE_TYPE_HEADLESS,
	}
	for _, c := range imp.GetClusters() {
		d.Clusters = append(d.Clusters, c.GetClusterId())
		if c.GetLeaseState() == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION {
			d.ReplicationHeld = append(d.ReplicationHeld, HeldCluster{ClusterID: c.GetClusterId(), Region: c.GetHeldRegion()})
		}
	}
	return d
}

// TopologyModeAnnotation makes kube-proxy before 1.31 read the hints of a Service's slices.
const TopologyModeAnnotation = "service.kubernetes.io/topology-mode"

// DerivedService is the derived Service of an import whose ServiceImport spec is spec:
// ClusterIP (or headless for a Headless import), the merged ports, no selector.
func DerivedService(imp *registryv1.ServiceImport, spec mcsv1beta1.ServiceImportSpec) *corev1.Service {
	ns, name := imp.GetService().GetNamespace(), imp.GetService().GetName()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: DerivedName(ns, name),
			Labels: map[string]string{mcsv1beta1.LabelServiceName: name, names.ManagedByLabel: names.ManagedBy},
			// kube-proxy before 1.31 reads a Service's zone hints only with this annotation
			// (later ones always do): the hints carry the locality tier.
			Annotations: map[string]string{TopologyModeAnnotation: "Auto"},
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP},
	}
	if imp.GetSpec().GetType() == registryv1.ServiceType_SERVICE_TYPE_HEADLESS {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	svc.Spec.SessionAffinity = spec.SessionAffinity
	svc.Spec.SessionAffinityConfig = spec.SessionAffinityConfig
	for _, p := range spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	return svc
}

// EndpointSlices are the imported slices: one set per source cluster, one or more slices per
// endpoint group, at most MaxEndpointsPerSlice endpoints and about MaxSliceAddressBytes of
// addresses each. Names are stable: <derived>-<cluster>-<group>-<chunk>. A port the
// registry excluded for a cluster (a PortConflict) is left out of that cluster's slices, so
// the data plane sends a port's traffic only to the clusters whose port the import holds.
func EndpointSlices(imp *registryv1.ServiceImport) []*discoveryv1.EndpointSlice {
	ns, name := imp.GetService().GetNamespace(), imp.GetService().GetName()
	derived := DerivedName(ns, name)
	var out []*discoveryv1.EndpointSlice
	for _, c := range imp.GetClusters() {
		excluded := make(map[string]bool, len(c.GetExcludedPorts()))
		for _, p := range c.GetExcludedPorts() {
			excluded[p.GetName()] = true
		}
		for gi, g := range c.GetEndpointGroups() {
			ports := make([]discoveryv1.EndpointPort, 0, len(g.GetPorts()))
			for _, p := range g.GetPorts() {
				if excluded[p.GetName()] {
					continue
				}
				ep := discoveryv1.EndpointPort{Name: ptr.To(p.GetName()), Port: ptr.To(p.GetPort()), Protocol: ptr.To(protocol(p.GetProtocol()))}
				if p.GetAppProtocol() != "" {
					ep.AppProtocol = ptr.To(p.GetAppProtocol())
				}
				ports = append(ports, ep)
			}
			newSlice := func(chunk int) *discoveryv1.EndpointSlice {
				return &discoveryv1.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: ns, Name: fmt.Sprintf("%s-%s-%d-%d", derived, c.GetClusterId(), gi, chunk),
						Labels: map[string]string{
							mcsv1beta1.LabelServiceName:   name,
							mcsv1beta1.LabelSourceCluster: c.GetClusterId(),
							discoveryv1.LabelServiceName:  derived,
							discoveryv1.LabelManagedBy:    names.ManagedBy,
						},
					},
					AddressType: discoveryv1.AddressType(g.GetAddressType()),
					Ports:       ports,
					Endpoints:   []discoveryv1.Endpoint{},
				}
			}
			chunk, bytes := 0, 0
			s := newSlice(chunk)
			out = append(out, s)
			for _, e := range g.GetEndpoints() {
				size := endpointBytes(e)
				if len(s.Endpoints) > 0 && (len(s.Endpoints) == MaxEndpointsPerSlice || bytes+size > MaxSliceAddressBytes) {
					chunk, bytes = chunk+1, 0
					s = newSlice(chunk)
					out = append(out, s)
				}
				s.Endpoints = append(s.Endpoints, endpoint(e))
				bytes += size
			}
		}
	}
	return out
}

// MaxSliceAddressBytes bounds the addresses and names in one imported EndpointSlice, so
// that a group of long FQDN addresses (100 endpoints of 100 addresses of 253 bytes is
// 2.5 MB) still makes slices the API server and etcd take (1.5 MiB per object by default).
const MaxSliceAddressBytes = 256 * 1024

// endpointBytes is about what one endpoint adds to a slice.
func endpointBytes(e *registryv1.Endpoint) int {
	n := len(e.GetHostname()) + len(e.GetZone()) + len(e.GetTargetPod()) + 64
	for _, a := range e.GetAddresses() {
		n += len(a) + 4
	}
	return n
}

// protocol is a port's protocol, TCP when unset (Kubernetes' default; an EndpointSlice port
// must name one).
func protocol(p string) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return corev1.Protocol(p)
}

// endpoint is the EndpointSlice endpoint of a registry endpoint. Conditions the source did
// not send stay unset: "unknown", which consumers read as ready, as in an EndpointSlice.
func endpoint(e *registryv1.Endpoint) discoveryv1.Endpoint {
	out := discoveryv1.Endpoint{Addresses: append([]string(nil), e.GetAddresses()...)}
	if c := e.GetConditions(); c != nil {
		out.Conditions = discoveryv1.EndpointConditions{Ready: c.Ready, Serving: c.Serving, Terminating: c.Terminating}
	}
	if e.GetHostname() != "" {
		out.Hostname = ptr.To(e.GetHostname())
	}
	if e.GetZone() != "" {
		out.Zone = ptr.To(e.GetZone())
	}
	if e.GetTargetPod() != "" {
		// The Pod lives in the source cluster: name it without a UID so consumers read the
		// replica's name and nothing resolves it locally.
		out.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.GetTargetPod()}
	}
	return out
}
