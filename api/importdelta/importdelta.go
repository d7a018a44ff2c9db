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
