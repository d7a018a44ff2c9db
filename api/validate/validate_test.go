package validate

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func validSpec() *registryv1.ExportSpec {
	return &registryv1.ExportSpec{
		Type:  registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
		Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
	}
}

func TestExportSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*registryv1.ExportSpec)
		want   string // substring of the error; empty: valid
	}{
		{"valid", func(*registryv1.ExportSpec) {}, ""},
		{"65 ports", func(s *registryv1.ExportSpec) {
			s.Ports = nil
			for i := range 65 {
				s.Ports = append(s.Ports, &registryv1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
			}
		}, "spec.ports: 65 ports, at most 64 allowed"},
		{"64 ports is fine", func(s *registryv1.ExportSpec) {
			s.Ports = nil
			for i := range 64 {
				s.Ports = append(s.Ports, &registryv1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
			}
		}, ""},
		{"65 labels", func(s *registryv1.ExportSpec) {
			s.ExportedLabels = map[string]string{}
			for i := range 65 {
				s.ExportedLabels[fmt.Sprintf("l%d", i)] = "v"
			}
		}, "spec.exported_labels: 65 labels, at most 64 allowed"},
		{"33 annotations", func(s *registryv1.ExportSpec) {
			s.ExportedAnnotations = map[string]string{}
			for i := range 33 {
				s.ExportedAnnotations[fmt.Sprintf("example.com/a%d", i)] = "v"
			}
		}, "spec.exported_annotations: 33 annotations, at most 32 allowed"},
		{"duplicate port", func(s *registryv1.ExportSpec) {
			s.Ports = append(s.Ports, &registryv1.ServicePort{Name: "web", Protocol: "", Port: 80})
		}, "spec.ports[1]: duplicate port TCP/80"},
		{"duplicate name", func(s *registryv1.ExportSpec) {
			s.Ports = append(s.Ports, &registryv1.ServicePort{Name: "http", Port: 81})
		}, `spec.ports[1].name: duplicate port name "http"`},
		{"unnamed port among several", func(s *registryv1.ExportSpec) {
			s.Ports = append(s.Ports, &registryv1.ServicePort{Port: 81})
		}, "spec.ports[1].name: required when there is more than one port"},
		{"port out of range", func(s *registryv1.ExportSpec) { s.Ports[0].Port = 70000 }, "spec.ports[0].port: 70000 is out of range"},
		{"bad protocol", func(s *registryv1.ExportSpec) { s.Ports[0].Protocol = "HTTP" }, `spec.ports[0].protocol: "HTTP" must be TCP, UDP or SCTP`},
		{"no type (ExternalName)", func(s *registryv1.ExportSpec) { s.Type = 0 }, "ExternalName Services cannot be exported"},
		{"bad affinity", func(s *registryv1.ExportSpec) { s.SessionAffinity = "Sticky" }, "spec.session_affinity"},
		{"affinity config without ClientIP", func(s *registryv1.ExportSpec) {
			s.SessionAffinityConfig = &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: 10}
		}, "allowed only with session_affinity ClientIP"},
		{"timeout out of range", func(s *registryv1.ExportSpec) {
			s.SessionAffinity = "ClientIP"
			s.SessionAffinityConfig = &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: 90000}
		}, "client_ip_timeout_seconds: 90000 is out of range"},
		{"bad family", func(s *registryv1.ExportSpec) { s.IpFamilies = []string{"IPv5"} }, "spec.ip_families[0]"},
		{"locality cluster,region", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION}
		}, ""},
		{"locality of every tier", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_REGION, registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_ANY}
		}, ""},
		{"locality unspecified tier", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_UNSPECIFIED}
		}, "spec.locality[0]: LOCALITY_TIER_UNSPECIFIED must be"},
		{"locality unknown tier", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, 7}
		}, "spec.locality[1]: 7 must be"},
		{"locality duplicate tier", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_CLUSTER}
		}, "spec.locality[1]: duplicate tier LOCALITY_TIER_CLUSTER"},
		{"locality of 4 tiers", func(s *registryv1.ExportSpec) {
			s.Locality = []registryv1.LocalityTier{1, 2, 3, 1}
		}, "spec.locality: 4 tiers, at most 3 allowed"},
		{"bad policy", func(s *registryv1.ExportSpec) { s.InternalTrafficPolicy = "Nearby" }, "spec.internal_traffic_policy"},
		{"bad label key", func(s *registryv1.ExportSpec) { s.ExportedLabels = map[string]string{"-x": "v"} }, `key "-x"`},
		{"long label value", func(s *registryv1.ExportSpec) {
			s.ExportedLabels = map[string]string{"x": strings.Repeat("v", 64)}
		}, "spec.exported_labels[x]"},
		// Service validation, validateServicePort: appProtocol is a qualified name.
		{"appProtocol not a qualified name", func(s *registryv1.ExportSpec) { s.Ports[0].AppProtocol = "Grpc Over TLS!" }, `spec.ports[0].app_protocol: "Grpc Over TLS!" must be a qualified name`},
		{"appProtocol of 256 characters", func(s *registryv1.ExportSpec) { s.Ports[0].AppProtocol = strings.Repeat("a", 256) }, "spec.ports[0].app_protocol"},
		{"appProtocol with a prefix", func(s *registryv1.ExportSpec) { s.Ports[0].AppProtocol = "kubernetes.io/h2c" }, ""},
		// Service validation: a Service with a cluster IP needs a port.
		{"ClusterSetIP without ports", func(s *registryv1.ExportSpec) { s.Ports = nil }, "spec.ports: required"},
		{"headless without ports", func(s *registryv1.ExportSpec) {
			s.Ports, s.Type = nil, registryv1.ServiceType_SERVICE_TYPE_HEADLESS
		}, ""},
		// ValidateAnnotations: the total of keys and values is at most 256 KiB; the importing
		// controller's own annotation must still fit.
		{"annotations of exactly 256 KiB", func(s *registryv1.ExportSpec) {
			s.ExportedAnnotations = map[string]string{"example.com/a": strings.Repeat("v", 256*1024-len("example.com/a"))}
		}, "spec.exported_annotations: 262144 bytes (keys and values), at most 258048 allowed"},
		{"annotations at the limit", func(s *registryv1.ExportSpec) {
			s.ExportedAnnotations = map[string]string{"example.com/a": strings.Repeat("v", MaxAnnotationBytes-len("example.com/a"))}
		}, ""},
		// ValidateAnnotations checks the lower-cased key: upper case is allowed in the name.
		{"annotation key with upper case", func(s *registryv1.ExportSpec) {
			s.ExportedAnnotations = map[string]string{"Example.com/Name": "v"}
		}, ""},
		{"annotation key with an empty prefix", func(s *registryv1.ExportSpec) {
			s.ExportedAnnotations = map[string]string{"/name": "v"}
		}, `key "/name"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(s)
			var errs Errors
			ExportSpec(&errs, "spec", s)
			err := errs.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		field, value, want string
	}{
		{"clusterset", "prod", ""},
		{"clusterset", "", "clusterset: required"},
		{"clusterset", "Prod", "must be a DNS label"},
		{"clusterset", long, "64 characters, at most 63 allowed"},
		{"cluster_id", "use1-a", ""},
		{"cluster_id", "-a", "must be a DNS label"},
	}
	for _, tc := range tests {
		var errs Errors
		DNSLabel(&errs, tc.field, tc.value)
		if err := errs.Err(); (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("DNSLabel(%s=%q) = %v, want %q", tc.field, tc.value, err, tc.want)
		}
	}
	var errs Errors
	ServiceName(&errs, "service.name", strings.Repeat("a", 63))
	ServiceName(&errs, "service.name", "1abc")
	if errs.Len() != 1 || !strings.Contains(errs.Err().Error(), "DNS-1035") {
		t.Fatalf("ServiceName errors = %v, want only the digit-first name refused", errs.Err())
	}
}

// TestErrorsBounded: however many errors a request has and however long its values, the
// error lists MaxErrors of them, counts the rest and quotes no value in full.
func TestErrorsBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	g := &registryv1.EndpointGroup{AddressType: "IPv4"}
	for range MaxEndpoints {
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{huge}})
	}
	var errs Errors
	EndpointGroups(&errs, "endpoint_groups", []*registryv1.EndpointGroup{g})
	msg := errs.Err().Error()
	if !strings.Contains(msg, "endpoint_groups[0].endpoints[0].addresses[0]: \"xxxx") || !strings.Contains(msg, "…(1048576 bytes)") {
		t.Errorf("error does not name the field with a cut value: %.300s", msg)
	}
	if errs.Len() != MaxErrors {
		t.Errorf("validation went on past %d errors: %d", MaxErrors, errs.Len())
	}
	if len(msg) > MaxErrors*300 {
		t.Errorf("error is %d bytes for a request with %d bad endpoints", len(msg), MaxEndpoints)
	}
	var many Errors
	for i := range 1000 {
		many.Add("f", "error %d", i)
	}
	if got := many.Err().Error(); !strings.HasSuffix(got, "error 9; and possibly more: only the first 10 errors are reported") || many.Len() != 1000 {
		t.Errorf("1000 errors: %q (Len %d)", got, many.Len())
	}
}

func TestRegion(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "us-east-1": true, "eu_west.2": true, "us-east-1\n": false, "a\x00b": false, strings.Repeat("a", 64): false, "-a": false} {
		var errs Errors
		Region(&errs, "region", v)
		if (errs.Err() == nil) != ok {
			t.Errorf("Region(%q): %v, want ok=%v", v, errs.Err(), ok)
		}
	}
}

func v4(a string) *registryv1.EndpointGroup {
	return &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{a}}}}
}

func v6(a string) *registryv1.EndpointGroup {
	return &registryv1.EndpointGroup{AddressType: "IPv6", Endpoints: []*registryv1.Endpoint{{Addresses: []string{a}}}}
}

func fqdn(a string) *registryv1.EndpointGroup {
	return &registryv1.EndpointGroup{AddressType: "FQDN", Endpoints: []*registryv1.Endpoint{{Addresses: []string{a}}}}
}

func TestEndpointGroups(t *testing.T) {
	ready := &registryv1.EndpointConditions{Ready: proto.Bool(true)}
	tests := []struct {
		name  string
		group *registryv1.EndpointGroup
		want  string
	}{
		{"valid IPv4", &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: ready}}}, ""},
		{"valid IPv6", &registryv1.EndpointGroup{AddressType: "IPv6", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"fd00::1"}}}}, ""},
		{"IPv6 in an IPv4 group", &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"fd00::1"}}}}, "is not an IPv4 address"},
		{"no address", &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{}}}, "0 addresses, must be between 1 and 100"},
		{"bad type", &registryv1.EndpointGroup{AddressType: "IPX"}, "address_type"},
		{"bad hostname", &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Hostname: "A_B"}}}, "hostname"},
		// An endpoint without conditions is "unknown", as in an EndpointSlice.
		{"no conditions", v4("10.0.0.1"), ""},
		// EndpointSlice validation, IsFullyQualifiedDomainName: at least two labels.
		{"single-label FQDN", fqdn("backend"), `"backend" must be a fully qualified domain name of at least two labels`},
		{"FQDN", fqdn("backend.example.com"), ""},
		{"FQDN with a trailing dot", fqdn("backend.example.com."), ""},
		{"FQDN label of 64 characters", fqdn(strings.Repeat("a", 64) + ".example.com"), "has a label of 64 characters"},
		// IsValidIPForLegacyField(strict): no IPv4-mapped IPv6; IsValidIP: canonical form.
		{"non-canonical IPv6", v6("FD00:0:0:0:0:0:0:1"), `must be written in canonical form, "fd00::1"`},
		{"IPv4-mapped IPv6", v6("::ffff:10.0.0.1"), "must not be an IPv4-mapped IPv6 address"},
		{"IPv4 with leading zeros", v4("010.0.0.1"), "is not an IPv4 address"},
		// ValidateEndpointIP: unspecified, loopback, link-local, link-local multicast.
		{"loopback", v4("127.0.0.1"), "loopback range"},
		{"IPv6 loopback", v6("::1"), "loopback range"},
		{"metadata service", v4("169.254.169.254"), "link-local range"},
		{"IPv6 link-local", v6("fe80::1"), "link-local range"},
		{"unspecified", v4("0.0.0.0"), "may not be unspecified"},
		{"link-local multicast", v4("224.0.0.1"), "link-local multicast range"},
		// validateEndpointPorts: names unique ("" included), appProtocol a qualified name.
		{"two ports named empty", &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Port: 80, Protocol: "TCP"}, {Port: 81, Protocol: "TCP"}}}, `endpoint_groups[0].ports[1].name: duplicate port name ""`},
		{"port without protocol", &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Port: 80}}}, ""},
		{"port with a bad appProtocol", &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Port: 80, AppProtocol: "not valid!"}}}, "endpoint_groups[0].ports[0].app_protocol"},
		{"target pod not a Pod name", &registryv1.EndpointGroup{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, TargetPod: "Pod_1"}}}, "target_pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var errs Errors
			EndpointGroups(&errs, "endpoint_groups", []*registryv1.EndpointGroup{tc.group})
			err := errs.Err()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
	big := &registryv1.EndpointGroup{AddressType: "IPv4"}
	for range MaxEndpoints + 1 {
		big.Endpoints = append(big.Endpoints, &registryv1.Endpoint{Addresses: []string{"10.0.0.1"}})
	}
	var errs Errors
	EndpointGroups(&errs, "endpoint_groups", []*registryv1.EndpointGroup{big})
	if err := errs.Err(); err == nil || !strings.Contains(err.Error(), "10001 endpoints, at most 10000 allowed") {
		t.Fatalf("oversize endpoint set error = %v", err)
	}
}

// FuzzValidateExport feeds arbitrary bytes as an export spec and endpoints: validation must
// never panic, whatever a client sends.
func FuzzValidateExport(f *testing.F) {
	seed, _ := proto.Marshal(&registryv1.PutExportRequest{Spec: validSpec(), EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &registryv1.PutExportRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		var errs Errors
		ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
		ServiceKey(&errs, "service", req.GetService())
		ExportSpec(&errs, "spec", req.GetSpec())
		EndpointGroups(&errs, "endpoint_groups", req.GetEndpointGroups())
		_ = errs.Err()
	})
}
