// Package importdelta applies the changes of a WatchImports stream opened with
// cluster_deltas: each ImportDelta carries only the source clusters whose part of an import
// changed, and the header only when it changed, so one endpoint flip in one cluster costs
// that cluster's endpoints on the wire, not the whole import's.
package importdelta

import (
	"sort"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Apply returns prev with d applied; prev (nil: the import is new) is not changed, and the
// result shares prev's unchanged clusters. A delta without a header on an import the
// receiver does not hold keeps an empty header: the stream was not followed from its start.
func Apply(prev *registryv1.ServiceImport, d *registryv1.ImportDelta) *registryv1.ServiceImport {
	out := &registryv1.ServiceImport{Service: d.GetService()}
	if prev != nil {
		out.Spec, out.WinningClusterId, out.Conflicts = prev.GetSpec(), prev.GetWinningClusterId(), prev.GetConflicts()
	}
	if h := d.GetHeader(); h != nil {
		out.Spec, out.WinningClusterId, out.Conflicts = h.GetSpec(), h.GetWinningClusterId(), h.GetConflicts()
	}
	drop := make(map[string]bool, len(d.GetRemovedClusterIds())+len(d.GetClusters()))
	for _, id := range d.GetRemovedClusterIds() {
		drop[id] = true
	}
	for _, cl := range d.GetClusters() {
		drop[cl.GetClusterId()] = true
	}
	out.Clusters = make([]*registryv1.ImportCluster, 0, len(prev.GetClusters())+len(d.GetClusters()))
	for _, cl := range prev.GetClusters() {
		if !drop[cl.GetClusterId()] {
			out.Clusters = append(out.Clusters, cl)
		}
	}
	out.Clusters = append(out.Clusters, d.GetClusters()...)
	sort.SliceStable(out.Clusters, func(i, j int) bool { return out.Clusters[i].GetClusterId() < out.Clusters[j].GetClusterId() })
	return out
}

// Key names a Service: "<namespace>/<name>".
func Key(k *registryv1.ServiceKey) string { return k.GetNamespace() + "/" + k.GetName() }

// View is a clusterset's imports as a WatchImports stream opened with cluster_deltas (and
// snapshot_page_size) sends them, by a key of the caller's choice. Feed it every message
// in order, and tell it when a stream ends (StreamEnded).
type View[K comparable] struct {
	// KeyOf names a Service in Imports.
	KeyOf func(*registryv1.ServiceKey) K
	// Imports by key: the state after the last message applied.
	Imports map[K]*registryv1.ServiceImport
	// Epoch and Revision of the last message applied: resume a broken stream with them.
	Epoch    string
	Revision int64
	// Snapshot: the last message applied ended a snapshot, which replaced Imports.
	Snapshot bool

	// paging gathers a snapshot that arrives in pages; nil outside one.
	paging map[K]*registryv1.ServiceImport
}

// NewView returns a View keyed by Key.
func NewView() *View[string] { return &View[string]{KeyOf: Key} }

// Apply applies one watch message and returns the keys of the Services it changed (a key
// absent from Imports afterwards was deleted), each once. While a snapshot's pages arrive
// it returns done false and changes nothing: the snapshot replaces Imports at its last
// page, so a reader never sees a partial set (which would look like deletions).
func (v *View[K]) Apply(msg *registryv1.WatchImportsResponse) (changed []K, done bool) {
	if msg.GetSnapshot() {
		v.paging = make(map[K]*registryv1.ServiceImport, len(msg.GetUpserts()))
	}
	seen := map[K]bool{}
	add := func(k K) {
		if !seen[k] {
			seen[k] = true
			changed = append(changed, k)
		}
	}
	if v.paging != nil {
		for _, imp := range msg.GetUpserts() {
			v.paging[v.KeyOf(imp.GetService())] = imp
		}
		if msg.GetSnapshotContinues() {
			return nil, false
		}
		for k := range v.Imports {
			if _, ok := v.paging[k]; !ok {
				add(k)
			}
		}
		for k := range v.paging {
			add(k)
		}
		v.Imports, v.paging, v.Snapshot = v.paging, nil, true
	} else {
		v.Snapshot = false
		if v.Imports == nil {
			v.Imports = map[K]*registryv1.ServiceImport{}
		}
		for _, imp := range msg.GetUpserts() {
			k := v.KeyOf(imp.GetService())
			v.Imports[k] = imp
			add(k)
		}
	}
	for _, d := range msg.GetDeltas() {
		k := v.KeyOf(d.GetService())
		v.Imports[k] = Apply(v.Imports[k], d)
		add(k)
	}
	for _, s := range msg.GetDeletes() {
		k := v.KeyOf(s)
		delete(v.Imports, k)
		add(k)
	}
	v.Epoch, v.Revision = msg.GetEpoch(), msg.GetRevision()
	return changed, true
}

// StreamEnded drops a snapshot the ended stream cut short: Imports, Epoch and Revision
// stay those of the last whole state, which a new stream resumes from.
func (v *View[K]) StreamEnded() { v.paging = nil }
