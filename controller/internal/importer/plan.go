package importer

import (
	"maps"
	"sort"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SlicePlan is what it takes to turn the imported EndpointSlices a cluster has into the ones
// an import wants: a pure function of the two (PlanSlices), carried out by applySlices.
type SlicePlan struct {
	// Delete: slices no longer wanted, and slices whose addressType changed (it is
	// immutable: they are made again, in Create).
	Delete []*discoveryv1.EndpointSlice
	// Update: the current slices with the wanted endpoints, ports, labels and owner.
	Update []*discoveryv1.EndpointSlice
	// Create: wanted slices that do not exist (or are made again).
	Create []*discoveryv1.EndpointSlice
	// Unchanged counts the slices that need no write.
	Unchanged int
}

// PlanSlices compares the current slices with the wanted ones (by name) and owner, the
// derived Service that must control them. Each list is sorted by name.
func PlanSlices(cur []discoveryv1.EndpointSlice, want []*discoveryv1.EndpointSlice, owner metav1.Object) SlicePlan {
	byName := make(map[string]*discoveryv1.EndpointSlice, len(want))
	for _, w := range want {
		byName[w.Name] = w
	}
	var p SlicePlan
	for i := range cur {
		c := &cur[i]
		w, ok := byName[c.Name]
		delete(byName, c.Name)
		switch {
		case !ok:
			p.Delete = append(p.Delete, c)
		case c.AddressType != w.AddressType:
			p.Delete = append(p.Delete, c)
			p.Create = append(p.Create, w)
		case !equality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) || !equality.Semantic.DeepEqual(c.Ports, w.Ports) ||
			!maps.Equal(c.Labels, w.Labels) || !metav1.IsControlledBy(c, owner):
			u := c.DeepCopy()
			u.Endpoints, u.Ports, u.Labels, u.OwnerReferences = w.Endpoints, w.Ports, w.Labels, w.OwnerReferences
			p.Update = append(p.Update, u)
		default:
			p.Unchanged++
		}
	}
	for _, w := range byName {
		p.Create = append(p.Create, w)
	}
	for _, l := range [][]*discoveryv1.EndpointSlice{p.Delete, p.Update, p.Create} {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	return p
}
