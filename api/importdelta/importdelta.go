// Package importdelta applies the changes of a WatchImports stream opened with
// cluster_deltas: each ImportDelta carries only the source clusters whose part of an import
// changed, and the header only when it changed, so one endpoint flip in one cluster costs
// that cluster's endpoints on the wire, not the whole import's.
package importdelta

import (
	"slices"
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
// snapshot_page_size) sends them. Feed it every message in order; the zero View is ready.
type View struct {
	// Imports by Key: the state after the last message applied.
	Imports map[string]*registryv1.ServiceImport
	// Epoch and Revision of the last message applied: resume a broken stream with them.
	Epoch    string
	Revision int64
	// Snapshot: the last message applied ended a snapshot, which replaced Imports.
	Snapshot bool

	// paging gathers a snapshot that arrives in pages; nil outside one.
	paging map[string]*registryv1.ServiceImport
}

// Apply applies one watch message and returns the Keys of the Services it changed (a Key
// absent from Imports afterwards was deleted). While a snapshot's pages arrive it returns
// done false and changes nothing: the snapshot replaces Imports at its last page, so a
// reader never sees a partial set (which would look like deletions).
func (v *View) Apply(msg *registryv1.WatchImportsResponse) (changed []string, done bool) {
	if msg.GetSnapshot() {
		v.paging = make(map[string]*registryv1.ServiceImport, len(msg.GetUpserts()))
	}
	if v.paging != nil {
		for _, imp := range msg.GetUpserts() {
			v.paging[Key(imp.GetService())] = imp
		}
		if msg.GetSnapshotContinues() {
			return nil, false
		}
		for k := range v.Imports {
			if _, ok := v.paging[k]; !ok {
				changed = append(changed, k)
			}
		}
		for k := range v.paging {
			changed = append(changed, k)
		}
		v.Imports, v.paging, v.Snapshot = v.paging, nil, true
	} else {
		v.Snapshot = false
		if v.Imports == nil {
			v.Imports = map[string]*registryv1.ServiceImport{}
		}
		for _, imp := range msg.GetUpserts() {
			k := Key(imp.GetService())
			v.Imports[k] = imp
			changed = append(changed, k)
		}
	}
	for _, d := range msg.GetDeltas() {
		k := Key(d.GetService())
		v.Imports[k] = Apply(v.Imports[k], d)
		changed = append(changed, k)
	}
	for _, s := range msg.GetDeletes() {
		k := Key(s)
		delete(v.Imports, k)
		changed = append(changed, k)
	}
	v.Epoch, v.Revision = msg.GetEpoch(), msg.GetRevision()
	sort.Strings(changed)
	return slices.Compact(changed), true
}
