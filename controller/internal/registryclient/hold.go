package registryclient

import (
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// refillHold keeps the imports seen before the registry's epoch changed. A new epoch means
// another registry process answers: after a memory-store restart it starts empty and fills
// again as each cluster registers and sends its exports (SyncExports, which the registry
// shows to watches in one step). Until a cluster appears again in the new epoch's imports,
// its entries from before are kept, so a restart does not delete endpoints that are about
// to come back. Additions and changes apply at once; a cluster that does not come back is
// dropped when the hold ends.
type refillHold struct {
	from, to string
	before   map[types.NamespacedName]*registryv1.ServiceImport
	// waiting are the clusters of before that have not appeared in the new epoch.
	waiting map[string]bool
}

// newRefillHold starts a hold over the imports of the old epoch.
func newRefillHold(from, to string, before map[types.NamespacedName]*registryv1.ServiceImport) *refillHold {
	h := &refillHold{from: from, to: to, before: before, waiting: map[string]bool{}}
	for _, imp := range before {
		for _, c := range imp.GetClusters() {
			h.waiting[c.GetClusterId()] = true
		}
	}
	return h
}

// update marks every waiting cluster that appears in now as returned, and returns the
// Services whose held entries that released.
func (h *refillHold) update(now map[types.NamespacedName]*registryv1.ServiceImport) (released []string, changed []types.NamespacedName) {
	back := map[string]bool{}
	for _, imp := range now {
		for _, c := range imp.GetClusters() {
			if h.waiting[c.GetClusterId()] {
				back[c.GetClusterId()] = true
			}
		}
	}
	if len(back) == 0 {
		return nil, nil
	}
	for id := range back {
		delete(h.waiting, id)
	}
	for k, imp := range h.before {
		for _, c := range imp.GetClusters() {
			if back[c.GetClusterId()] {
				changed = append(changed, k)
				break
			}
		}
	}
	released = slices.Sorted(maps.Keys(back))
	return released, changed
}

// keys returns the Services that have held entries.
func (h *refillHold) keys() []types.NamespacedName {
	var out []types.NamespacedName
	for k, imp := range h.before {
		for _, c := range imp.GetClusters() {
			if h.waiting[c.GetClusterId()] {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// withHeld returns the import to apply: cur with the entries of waiting clusters from
// before that cur lacks, and the ids of those clusters (nil when nothing is held, and then
// cur itself). Without cur, before's spec is used. Neither argument is changed.
func withHeld(cur, before *registryv1.ServiceImport, waiting map[string]bool) (*registryv1.ServiceImport, []string) {
	present := map[string]bool{}
	for _, c := range cur.GetClusters() {
		present[c.GetClusterId()] = true
	}
	var held []*registryv1.ImportCluster
	var ids []string
	for _, c := range before.GetClusters() {
		if waiting[c.GetClusterId()] && !present[c.GetClusterId()] {
			held = append(held, c)
			ids = append(ids, c.GetClusterId())
		}
	}
	if len(held) == 0 {
		return cur, nil
	}
	base := cur
	if base == nil {
		base = before
	}
	out := &registryv1.ServiceImport{
		Service: base.GetService(), Spec: base.GetSpec(), WinningClusterId: base.GetWinningClusterId(), Conflicts: base.GetConflicts(),
		Clusters: append(slices.Clip(cur.GetClusters()), held...),
	}
	sort.Slice(out.Clusters, func(i, j int) bool { return out.Clusters[i].GetClusterId() < out.Clusters[j].GetClusterId() })
	return out, ids
}
