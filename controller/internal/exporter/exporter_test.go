package exporter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func TestConflictReason(t *testing.T) {
	want := map[registryv1.ConflictReason]mcsv1beta1.ServiceExportConditionReason{
		registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT:                    mcsv1beta1.ServiceExportReasonPortConflict,
		registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT:                    mcsv1beta1.ServiceExportReasonTypeConflict,
		registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFLICT:        mcsv1beta1.ServiceExportReasonSessionAffinityConflict,
		registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFIG_CONFLICT: mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict,
		registryv1.ConflictReason_CONFLICT_REASON_LABELS_CONFLICT:                  mcsv1beta1.ServiceExportReasonLabelsConflict,
		registryv1.ConflictReason_CONFLICT_REASON_ANNOTATIONS_CONFLICT:             mcsv1beta1.ServiceExportReasonAnnotationsConflict,
		registryv1.ConflictReason_CONFLICT_REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT: mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict,
		registryv1.ConflictReason_CONFLICT_REASON_TRAFFIC_DISTRIBUTION_CONFLICT:    mcsv1beta1.ServiceExportReasonTrafficDistributionConflict,
		registryv1.ConflictReason_CONFLICT_REASON_IP_FAMILY_CONFLICT:               mcsv1beta1.ServiceExportReasonIPFamilyConflict,
		// Ours: the locality annotation is not an mcs-api field.
		registryv1.ConflictReason_CONFLICT_REASON_LOCALITY_CONFLICT: "LocalityConflict",
	}
	for r, w := range want {
		if got := ConflictReason(r); got != string(w) {
			t.Errorf("ConflictReason(%s) = %s, want %s", r, got, w)
		}
	}
	if len(want) != len(registryv1.ConflictReason_name)-1 {
		t.Fatalf("a conflict reason of the API has no Kubernetes reason here")
	}
}

func TestSpec(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc := &corev1.Service{Spec: corev1.ServiceSpec{
		ClusterIP:             corev1.ClusterIPNone,
		Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, AppProtocol: ptr.To("kubernetes.io/h2c")}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}},
		IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		InternalTrafficPolicy: &local,
		TrafficDistribution:   ptr.To("PreferClose"),
	}}
	se := &mcsv1beta1.ServiceExport{Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "gold"}, ExportedAnnotations: map[string]string{"a": "b"}}}
	s := Spec(svc, se)
	want := `ports:{name:"http" protocol:"TCP" app_protocol:"kubernetes.io/h2c" port:80} ports:{name:"dns" protocol:"UDP" port:53} type:SERVICE_TYPE_HEADLESS session_affinity:"ClientIP" session_affinity_config:{client_ip_timeout_seconds:60} ip_families:"IPv4" ip_families:"IPv6" internal_traffic_policy:"Local" traffic_distribution:"PreferClose" exported_labels:{key:"tier" value:"gold"} exported_annotations:{key:"a" value:"b"}`
	if got := compact(s.String()); got != want {
		t.Fatalf("Spec =\n%s\nwant\n%s", got, want)
	}
}

func compact(s string) string {
	out := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\n' {
			space = true
			continue
		}
		if space && len(out) > 0 && s[i] != '}' && out[len(out)-1] != '{' {
			out = append(out, ' ')
		}
		space = false
		out = append(out, s[i])
	}
	return string(out)
}

func TestEndpointGroups(t *testing.T) {
	slices := []discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}, Zone: ptr.To("z1"), NodeName: ptr.To("n1"), Hostname: ptr.To("h"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "p2"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, AddressType: discoveryv1.AddressTypeIPv6},
	}
	groups := EndpointGroups(slices)
	if len(groups) != 2 {
		t.Fatalf("groups = %d, want 2 (the empty slice is left out)", len(groups))
	}
	if groups[0].GetEndpoints()[0].GetAddresses()[0] != "10.0.0.1" {
		t.Fatal("groups are not ordered by slice name")
	}
	e := groups[1].GetEndpoints()[0]
	if e.GetConditions().GetReady() || !e.GetConditions().GetTerminating() || e.GetConditions().Serving != nil || e.GetZone() != "z1" || e.GetNodeName() != "n1" || e.GetHostname() != "h" || e.GetTargetPod() != "p2" {
		t.Fatalf("endpoint = %v", e)
	}
	if p := groups[1].GetPorts()[0]; p.GetProtocol() != "TCP" || p.GetPort() != 8080 || p.GetName() != "http" {
		t.Fatalf("port = %v, want http/TCP/8080 (an unset protocol is TCP)", p)
	}
}

func TestConflictConditionNamesPorts(t *testing.T) {
	port := func(name, proto string, n int32) *registryv1.ServicePort {
		return &registryv1.ServicePort{Name: name, Protocol: proto, Port: n}
	}
	portC := []registryv1.ConflictReason{registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT}
	imp := &registryv1.ServiceImport{WinningClusterId: "a", Conflicts: portC, Clusters: []*registryv1.ImportCluster{
		{ClusterId: "a", Conflicts: portC, MissingPorts: []*registryv1.ServicePort{port("sctp", "SCTP", 142)}},
		{ClusterId: "b", Conflicts: portC, MissingPorts: []*registryv1.ServicePort{port("udp", "UDP", 42)}, ExcludedPorts: []*registryv1.ServicePort{port("http", "", 81)}},
		{ClusterId: "c", Conflicts: portC},
	}}
	tests := []struct {
		name string
		v    *registryv1.ExportVerdict
		imp  *registryv1.ServiceImport
		want string
	}{
		{"from the import: every cluster's differences", verdictFrom(imp, "c"), imp,
			"the exports of this Service disagree (PortConflict); the oldest export, from cluster a, wins; ports differ: a lacks sctp/SCTP/142; b lacks udp/UDP/42 and has http/TCP/81 (left out of the ServiceImport)"},
		{"from the verdict alone: this cluster's", verdictFrom(imp, "b"), nil,
			"the exports of this Service disagree (PortConflict); the oldest export, from cluster a, wins; ports differ: b lacks udp/UDP/42 and has http/TCP/81 (left out of the ServiceImport)"},
		{"no conflict", &registryv1.ExportVerdict{WinningClusterId: "a"}, nil, "the exports of this Service agree"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "c"
			if tc.imp == nil {
				id = "b"
			}
			if got := conflictCondition(tc.v, tc.imp, id).Message; got != tc.want {
				t.Errorf("message =\n %s\nwant\n %s", got, tc.want)
			}
		})
	}
}

// TestEndpointGroupsCanonicalAddresses: an IPv6 address the source's API server holds in
// another spelling is sent in canonical form, which the registry's contract requires;
// FQDN addresses are sent as they are.
func TestEndpointGroupsCanonicalAddresses(t *testing.T) {
	groups := EndpointGroups([]discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, AddressType: discoveryv1.AddressTypeIPv6,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"FD00:0:0:0:0:0:0:1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"Backend.Example.com"}}}},
	})
	if got := groups[0].GetEndpoints()[0].GetAddresses()[0]; got != "fd00::1" {
		t.Errorf("IPv6 address sent as %q, want fd00::1", got)
	}
	if got := groups[1].GetEndpoints()[0].GetAddresses()[0]; got != "Backend.Example.com" {
		t.Errorf("FQDN address sent as %q", got)
	}
}
