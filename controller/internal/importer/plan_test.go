package importer

import (
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPlanSlices(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "derived-x", UID: "u1"}
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "derived-x", UID: "u1", Controller: ptr.To(true)}}
	slice := func(name string, addr discoveryv1.AddressType, ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{"l": "v"}, OwnerReferences: ref},
			AddressType: addr, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}},
		}
	}
	v4 := discoveryv1.AddressTypeIPv4
	names := func(l []*discoveryv1.EndpointSlice) string {
		var out []string
		for _, s := range l {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name          string
		cur           []*discoveryv1.EndpointSlice
		want          []*discoveryv1.EndpointSlice
		del, upd, add string
		unchanged     int
	}{
		{"nothing to do", []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, "", "", "", 1},
		{"first import", nil, []*discoveryv1.EndpointSlice{slice("b", v4, "10.0.0.2"), slice("a", v4, "10.0.0.1")}, "", "", "a,b", 0},
		{"an endpoint changed", []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.9")}, "", "a", "", 0},
		{"a source left", []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1"), slice("b", v4, "10.0.0.2")}, []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, "b", "", "", 1},
		{"addressType changed: made again", []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv6, "fd00::1")}, "a", "", "a", 0},
		{"the import is gone", []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, nil, "a", "", "", 0},
		{"another owner", []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
			s := slice("a", v4, "10.0.0.1")
			s.OwnerReferences = nil
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, "", "a", "", 0},
		{"a label changed", []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
			s := slice("a", v4, "10.0.0.1")
			s.Labels = map[string]string{"l": "old"}
			return s
		}()}, []*discoveryv1.EndpointSlice{slice("a", v4, "10.0.0.1")}, "", "a", "", 0},
	} {
		cur := make([]discoveryv1.EndpointSlice, len(tc.cur))
		for i, c := range tc.cur {
			cur[i] = *c
		}
		p := PlanSlices(cur, tc.want, owner)
		if names(p.Delete) != tc.del || names(p.Update) != tc.upd || names(p.Create) != tc.add || p.Unchanged != tc.unchanged {
			t.Errorf("%s: delete %q update %q create %q unchanged %d; want %q %q %q %d", tc.name,
				names(p.Delete), names(p.Update), names(p.Create), p.Unchanged, tc.del, tc.upd, tc.add, tc.unchanged)
		}
		for _, u := range p.Update {
			if !metav1.IsControlledBy(u, owner) || u.Labels["l"] != "v" {
				t.Errorf("%s: update of %s does not carry the wanted owner and labels", tc.name, u.Name)
			}
		}
		if len(tc.cur) > 0 && len(p.Update) > 0 && &cur[0] == p.Update[0] {
			t.Errorf("%s: the update changes the cached object in place", tc.name)
		}
	}
}
