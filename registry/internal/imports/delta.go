package imports

import (
	"slices"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// The merge builds every import afresh. Its clusters that did not change are swapped for
// the previous import's (shareUnchanged), so the history of a Service's imports, kept for
// the deltas of watches, costs only what changed, and "did this cluster's part change" is a
// pointer comparison.

// shareUnchanged returns cur with each cluster that equals prev's entry replaced by
// prev's entry.
func shareUnchanged(prev, cur *registryv1.ServiceImport) *registryv1.ServiceImport {
	if prev == nil || cur == nil {
		return cur
	}
	old := make(map[string]*registryv1.ImportCluster, len(prev.GetClusters()))
	for _, cl := range prev.GetClusters() {
		old[cl.GetClusterId()] = cl
	}
	for i, cl := range cur.Clusters {
		if p := old[cl.GetClusterId()]; p != nil && sameCluster(p, cl) {
			cur.Clusters[i] = p
		}
	}
	return cur
}

// sameImport is proto.Equal for imports whose unchanged clusters are shared.
func sameImport(a, b *registryv1.ServiceImport) bool {
	if !sameHeader(a, b) || len(a.GetClusters()) != len(b.GetClusters()) {
		return false
	}
	for i, cl := range a.GetClusters() {
		if cl != b.GetClusters()[i] && !sameCluster(cl, b.GetClusters()[i]) {
			return false
		}
	}
	return true
}

func sameHeader(a, b *registryv1.ServiceImport) bool {
	return a.GetWinningClusterId() == b.GetWinningClusterId() && slices.Equal(a.GetConflicts(), b.GetConflicts()) &&
		proto.Equal(a.GetSpec(), b.GetSpec()) && proto.Equal(a.GetService(), b.GetService())
}

// sameCluster is proto.Equal, comparing the endpoint groups (shared with the exports) by
// pointer first.
func sameCluster(a, b *registryv1.ImportCluster) bool {
	if a == b {
		return true
	}
	if a.GetClusterId() != b.GetClusterId() || !slices.Equal(a.GetConflicts(), b.GetConflicts()) ||
		a.GetLeaseState() != b.GetLeaseState() || a.GetHeldRegion() != b.GetHeldRegion() ||
		!proto.Equal(a.GetExportCreateTime(), b.GetExportCreateTime()) || !proto.Equal(a.GetExportUpdateTime(), b.GetExportUpdateTime()) ||
		!slices.EqualFunc(a.GetMissingPorts(), b.GetMissingPorts(), portEqual) || !slices.EqualFunc(a.GetExcludedPorts(), b.GetExcludedPorts(), portEqual) {
		return false
	}
	return slices.EqualFunc(a.GetEndpointGroups(), b.GetEndpointGroups(), func(x, y *registryv1.EndpointGroup) bool {
		return x == y || proto.Equal(x, y)
	})
}

func portEqual(a, b *registryv1.ServicePort) bool { return proto.Equal(a, b) }

// deltaOf is what changed from prev (nil: the watcher had no import) to cur, as f shows
// them; nil when f shows no change.
func deltaOf(prev, cur *registryv1.ServiceImport, f Filter) *registryv1.ImportDelta {
	d := &registryv1.ImportDelta{Service: cur.GetService()}
	if prev == nil || !sameHeader(prev, cur) {
		d.Header = &registryv1.ImportHeader{Spec: cur.GetSpec(), WinningClusterId: cur.GetWinningClusterId(), Conflicts: cur.GetConflicts()}
	}
	old := make(map[string]*registryv1.ImportCluster, len(prev.GetClusters()))
	for _, cl := range prev.GetClusters() {
		old[cl.GetClusterId()] = cl
	}
	for _, cl := range cur.GetClusters() {
		p, had := old[cl.GetClusterId()]
		delete(old, cl.GetClusterId())
		if had && p == cl {
			continue
		}
		v := f.clusterView(cl)
		if had && !f.IncludeEndpoints && proto.Equal(f.clusterView(p), v) {
			// Only its endpoints changed, and this watcher does not see endpoints.
			continue
		}
		d.Clusters = append(d.Clusters, v)
	}
	for _, cl := range prev.GetClusters() {
		if _, gone := old[cl.GetClusterId()]; gone {
			d.RemovedClusterIds = append(d.RemovedClusterIds, cl.GetClusterId())
		}
	}
	if d.Header == nil && len(d.Clusters) == 0 && len(d.RemovedClusterIds) == 0 {
		return nil
	}
	return d
}
