// Package validate is the registry's export contract: it checks registry requests the way
// the kube-apiserver checks the objects an importing controller writes from them (the
// ServiceImport, its derived Service and the imported EndpointSlices), so that what the
// registry accepts every member cluster can write. Every error names the field and the
// limit it broke. Clients may run the same checks before they send.
package validate

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Limits of one export. They bound what one cluster can make every registry replica and
// every member cluster hold.
const (
	MaxPorts               = 64
	MaxExportedLabels      = 64
	MaxExportedAnnotations = 32
	// MaxAnnotationBytes is the total size of the exported annotations: Kubernetes' 256 KiB
	// (TotalAnnotationSizeLimitB, the sum of every key and value) less ReservedAnnotationBytes.
	MaxAnnotationBytes = 256*1024 - ReservedAnnotationBytes
	// ReservedAnnotationBytes is the room kept on a ServiceImport for the annotations the
	// importing controller adds (multicluster.kubernetes.io/derived-service) and those
	// Kubernetes tools keep there (kubectl's and the like).
	ReservedAnnotationBytes = 4 * 1024
	MaxEndpoints            = 10000
	MaxEndpointGroups       = 64
	MaxEndpointPorts        = 64
	MaxAddressesPerEndpoint = 100
	MaxExportsPerSync       = 10000
	MinLeaseDuration        = 5 * time.Second
	MaxLeaseDuration        = time.Hour
	DefaultLeaseDuration    = 30 * time.Second
)

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035    = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	qualified  = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// DNSLabel checks an RFC 1123 label: clusterset, cluster id, namespace.
func DNSLabel(errs *Errors, field, v string) {
	switch {
	case v == "":
		errs.add(field, "required")
	case len(v) > 63:
		errs.add(field, "%q is %d characters, at most 63 allowed", v, len(v))
	case !dnsLabel.MatchString(v):
		errs.add(field, "%q must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit", v)
	}
}

// ServiceName checks a Service name: an RFC 1035 label of at most 63 characters.
func ServiceName(errs *Errors, field, v string) {
	switch {
	case v == "":
		errs.add(field, "required")
	case len(v) > 63:
		errs.add(field, "%q is %d characters, at most 63 allowed", v, len(v))
	case !dns1035.MatchString(v):
		errs.add(field, "%q must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter", v)
	}
}

// ClusterKey checks the clusterset and cluster id of a request.
func ClusterKey(errs *Errors, clusterset, clusterID string) {
	DNSLabel(errs, "clusterset", clusterset)
	DNSLabel(errs, "cluster_id", clusterID)
}

// ServiceKey checks a Service's namespace and name.
func ServiceKey(errs *Errors, field string, k *registryv1.ServiceKey) {
	if k == nil {
		errs.add(field, "required")
		return
	}
	DNSLabel(errs, field+".namespace", k.GetNamespace())
	ServiceName(errs, field+".name", k.GetName())
}

// Region checks a cluster's region: optional, a label value (at most 63 letters, digits,
// '-', '_' and '.'), as in the topology.kubernetes.io/region label it usually comes from.
func Region(errs *Errors, field, v string) {
	if len(v) > 63 || !labelValue.MatchString(v) {
		errs.add(field, "%q must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", v)
	}
}

// Version checks a component's version as it reports it: optional, at most 63 letters,
// digits, '.', '_', '-' and '+' (a semantic version, or a commit with a suffix).
func Version(errs *Errors, field, v string) {
	if len(v) > 63 || !versionChars.MatchString(v) {
		errs.add(field, "%q must be at most 63 characters of letters, digits, '.', '_', '-' and '+'", v)
	}
}

var versionChars = regexp.MustCompile(`^[A-Za-z0-9._+-]*$`)

// LeaseDuration checks a requested lease; zero means the default.
func LeaseDuration(errs *Errors, field string, d time.Duration) {
	if d != 0 && (d < MinLeaseDuration || d > MaxLeaseDuration) {
		errs.add(field, "%s is out of range, must be between %s and %s", d, MinLeaseDuration, MaxLeaseDuration)
	}
}

func protocol(errs *Errors, field, p string) {
	switch p {
	case "", "TCP", "UDP", "SCTP":
	default:
		errs.add(field, "%q must be TCP, UDP or SCTP", p)
	}
}

func portNumber(errs *Errors, field string, n int32) {
	if n < 1 || n > 65535 {
		errs.add(field, "%d is out of range, must be between 1 and 65535", n)
	}
}

// portName checks an optional port name: a DNS label (ValidateDNS1123Label).
func portName(errs *Errors, field, name string) {
	if name != "" && (len(name) > 63 || !dnsLabel.MatchString(name)) {
		errs.add(field, "%q must be a DNS label of at most 63 characters", name)
	}
}

// ServicePort checks one port of an export's spec alone: its name (optional, a DNS label),
// protocol, number and application protocol. field is its path, for example "spec.ports[0]".
func ServicePort(errs *Errors, field string, p *registryv1.ServicePort) {
	portName(errs, field+".name", p.GetName())
	protocol(errs, field+".protocol", p.GetProtocol())
	portNumber(errs, field+".port", p.GetPort())
	appProtocol(errs, field+".app_protocol", p.GetAppProtocol())
}

// ExportSpec checks an export's spec; field is its path, for example "spec".
func ExportSpec(errs *Errors, field string, s *registryv1.ExportSpec) {
	if s == nil {
		errs.add(field, "required")
		return
	}
	if n := len(s.GetPorts()); n > MaxPorts {
		errs.add(field+".ports", "%d ports, at most %d allowed", n, MaxPorts)
	} else {
		names := map[string]bool{}
		numbers := map[string]bool{}
		for i, p := range s.GetPorts() {
			pf := fmt.Sprintf("%s.ports[%d]", field, i)
			if p.GetName() == "" && len(s.GetPorts()) > 1 {
				errs.add(pf+".name", "required when there is more than one port")
			}
			ServicePort(errs, pf, p)
			if names[p.GetName()] {
				errs.add(pf+".name", "duplicate port name %q", p.GetName())
			}
			names[p.GetName()] = true
			proto := p.GetProtocol()
			if proto == "" {
				proto = "TCP"
			}
			key := fmt.Sprintf("%s/%d", proto, p.GetPort())
			if numbers[key] {
				errs.add(pf, "duplicate port %s", key)
			}
			numbers[key] = true
		}
	}
	switch s.GetType() {
	case registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP:
		// Kubernetes: a Service with a cluster IP needs a port (spec.ports: Required value).
		if len(s.GetPorts()) == 0 {
			errs.add(field+".ports", "required: a SERVICE_TYPE_CLUSTER_SET_IP export needs at least one port")
		}
	case registryv1.ServiceType_SERVICE_TYPE_HEADLESS:
	default:
		errs.add(field+".type", "must be SERVICE_TYPE_CLUSTER_SET_IP or SERVICE_TYPE_HEADLESS (ExternalName Services cannot be exported)")
	}
	switch s.GetSessionAffinity() {
	case "", "None", "ClientIP":
	default:
		errs.add(field+".session_affinity", "%q must be None or ClientIP", s.GetSessionAffinity())
	}
	if c := s.GetSessionAffinityConfig(); c != nil {
		if s.GetSessionAffinity() != "ClientIP" {
			errs.add(field+".session_affinity_config", "allowed only with session_affinity ClientIP")
		} else if t := c.GetClientIpTimeoutSeconds(); t < 1 || t > 86400 {
			errs.add(field+".session_affinity_config.client_ip_timeout_seconds", "%d is out of range, must be between 1 and 86400", t)
		}
	}
	fams := map[string]bool{}
	if len(s.GetIpFamilies()) > 2 {
		errs.add(field+".ip_families", "%d families, at most 2 allowed", len(s.GetIpFamilies()))
	}
	for i, f := range s.GetIpFamilies() {
		if f != "IPv4" && f != "IPv6" {
			errs.add(fmt.Sprintf("%s.ip_families[%d]", field, i), "%q must be IPv4 or IPv6", f)
		} else if fams[f] {
			errs.add(fmt.Sprintf("%s.ip_families[%d]", field, i), "duplicate family %q", f)
		}
		fams[f] = true
	}
	switch s.GetInternalTrafficPolicy() {
	case "", "Cluster", "Local":
	default:
		errs.add(field+".internal_traffic_policy", "%q must be Cluster or Local", s.GetInternalTrafficPolicy())
	}
	if td := s.GetTrafficDistribution(); td != "" && (len(td) > 63 || !qualified.MatchString(td)) {
		errs.add(field+".traffic_distribution", "%q must be a name of at most 63 characters", td)
	}
	locality(errs, field+".locality", s.GetLocality())
	if n := len(s.GetExportedLabels()); n > MaxExportedLabels {
		errs.add(field+".exported_labels", "%d labels, at most %d allowed", n, MaxExportedLabels)
	} else {
		for k, v := range s.GetExportedLabels() {
			qualifiedKey(errs, field+".exported_labels", k)
			if len(v) > 63 || !labelValue.MatchString(v) {
				errs.add(field+".exported_labels["+k+"]", "value %q must be at most 63 characters of letters, digits, '-', '_' and '.'", v)
			}
		}
	}
	if n := len(s.GetExportedAnnotations()); n > MaxExportedAnnotations {
		errs.add(field+".exported_annotations", "%d annotations, at most %d allowed", n, MaxExportedAnnotations)
	} else {
		size := 0
		for k, v := range s.GetExportedAnnotations() {
			// Kubernetes' ValidateAnnotations checks the lower-cased key.
			qualifiedKey(errs, field+".exported_annotations", strings.ToLower(k))
			size += len(k) + len(v)
		}
		if size > MaxAnnotationBytes {
			errs.add(field+".exported_annotations", "%d bytes (keys and values), at most %d allowed: Kubernetes' 256 KiB less %d kept for the importing controller's own annotations", size, MaxAnnotationBytes, ReservedAnnotationBytes)
		}
	}
}

// MaxLocalityTiers bounds a locality policy: each tier at most once.
const MaxLocalityTiers = 3

// locality checks a locality policy: known tiers, each at most once.
func locality(errs *Errors, field string, tiers []registryv1.LocalityTier) {
	if len(tiers) > MaxLocalityTiers {
		errs.add(field, "%d tiers, at most %d allowed", len(tiers), MaxLocalityTiers)
		return
	}
	seen := map[registryv1.LocalityTier]bool{}
	for i, t := range tiers {
		switch t {
		case registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION, registryv1.LocalityTier_LOCALITY_TIER_ANY:
		default:
			errs.add(fmt.Sprintf("%s[%d]", field, i), "%v must be LOCALITY_TIER_CLUSTER, LOCALITY_TIER_REGION or LOCALITY_TIER_ANY", t)
			continue
		}
		if seen[t] {
			errs.add(fmt.Sprintf("%s[%d]", field, i), "duplicate tier %v", t)
		}
		seen[t] = true
	}
}

// qualifiedKey checks a label or annotation key: Kubernetes' qualified name, an optional DNS
// subdomain prefix and a name of at most 63 characters.
func qualifiedKey(errs *Errors, field, k string) {
	if msgs := content.IsLabelKey(k); len(msgs) > 0 {
		errs.add(field, "key %q: %s", k, msgs[0])
	}
}

// appProtocol checks a port's application protocol: a qualified name when set (Kubernetes'
// Service and EndpointSlice validation: ValidateQualifiedName).
func appProtocol(errs *Errors, field, v string) {
	if v == "" {
		return
	}
	if msgs := content.IsLabelKey(v); len(msgs) > 0 {
		errs.add(field, "%q must be a qualified name such as \"http\" or \"example.com/proto\": %s", v, msgs[0])
	}
}
