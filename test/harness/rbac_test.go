package harness

import "testing"

func TestRefusalRE(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`E1202 21:55:51.568775   15719 reflector.go:227] "Failed to watch" err="endpointslices.discovery.k8s.io is forbidden: User \"system:serviceaccount:global-discovery:global-discovery-service\" cannot watch resource \"endpointslices\" in API group \"discovery.k8s.io\" at the cluster scope"`,
			"system:serviceaccount:global-discovery:global-discovery-service watch endpointslices discovery.k8s.io "},
		{`{"err":"serviceexports.multicluster.x-k8s.io \"x\" is forbidden: User \"system:serviceaccount:mcs-system:mcs-controller\" cannot patch resource \"serviceexports/status\" in API group \"multicluster.x-k8s.io\" in the namespace \"dynamo\""}`,
			"system:serviceaccount:mcs-system:mcs-controller patch serviceexports/status multicluster.x-k8s.io dynamo"},
		{`events is forbidden: User "system:serviceaccount:mcs-system:mcs-controller" cannot create resource "events" in API group "" in the namespace "mcs-system"`,
			"system:serviceaccount:mcs-system:mcs-controller create events  mcs-system"},
	} {
		m := refusalRE.FindStringSubmatch(tc.line)
		if m == nil {
			t.Errorf("no match: %s", tc.line)
			continue
		}
		if got := m[1] + " " + m[2] + " " + m[3] + " " + m[4] + " " + m[5]; got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
