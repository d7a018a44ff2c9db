package registryclient

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// refill is what the watch saw of a registry whose records are filling again: its epoch
// changed (another registry process answers, for example a memory-store registry that
// restarted empty), or this watch's first snapshot came from a registry that started
// empty shortly before. Until it ends, a source cluster missing from the imports may be
// about to send its exports again; the watch reports which (RefillUntil), and the importer
// decides what to keep of them (its hold). The watch itself shows the registry's imports
// as they are.
type refill struct {
	until time.Time
	// awaited are the clusters of the old epoch that have not appeared in the new one's
	// imports; nil after a first snapshot, which has no old epoch: then every cluster not
	// seen since is awaited.
	awaited map[string]bool
	seen    map[string]bool
	timer   *time.Timer
	// after names what began it, for the log of its end.
	after string
}

// awaits reports whether cluster may still be sending its exports again.
func (f *refill) awaits(cluster string) bool {
	if f.awaited != nil {
		return f.awaited[cluster]
	}
	return !f.seen[cluster]
}

// saw records the clusters of imports as returned, and returns the awaited ones among them.
func (f *refill) saw(imports []*registryv1.ServiceImport) []string {
	back := map[string]bool{}
	for _, imp := range imports {
		for _, c := range imp.GetClusters() {
			id := c.GetClusterId()
			if f.awaits(id) {
				back[id] = true
			}
			if f.awaited != nil {
				delete(f.awaited, id)
			} else {
				f.seen[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(back))
}

// clustersOf returns the clusters with an entry in any of imports.
func clustersOf(imports map[types.NamespacedName]*registryv1.ServiceImport) map[string]bool {
	out := map[string]bool{}
	for _, imp := range imports {
		for _, c := range imp.GetClusters() {
			out[c.GetClusterId()] = true
		}
	}
	return out
}
