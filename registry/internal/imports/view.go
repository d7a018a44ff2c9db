package imports

import (
	"context"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Filter selects what a list or a watch returns.
type Filter struct {
	// Namespace limits the imports to one namespace when set.
	Namespace string
	// IncludeEndpoints keeps each cluster's endpoint groups.
	IncludeEndpoints bool
	// ClusterDeltas sends changes as ImportDeltas (WatchImportsRequest.cluster_deltas).
	ClusterDeltas bool
}

func (f Filter) match(k store.ServiceKey) bool {
	return f.Namespace == "" || f.Namespace == k.Namespace
}

// view returns the import as the filter shows it. Imports are shared and never changed
// after they are computed, so only a stripped copy is built.
func (f Filter) view(imp *registryv1.ServiceImport) *registryv1.ServiceImport {
	if f.IncludeEndpoints {
		return imp
	}
	out := &registryv1.ServiceImport{
		Service: imp.GetService(), Spec: imp.GetSpec(), WinningClusterId: imp.GetWinningClusterId(),
		Conflicts: imp.GetConflicts(), Clusters: make([]*registryv1.ImportCluster, len(imp.GetClusters())),
	}
	for i, cl := range imp.GetClusters() {
		out.Clusters[i] = f.clusterView(cl)
	}
	return out
}

// clusterView returns one cluster's part of an import as the filter shows it.
func (f Filter) clusterView(cl *registryv1.ImportCluster) *registryv1.ImportCluster {
	if f.IncludeEndpoints {
		return cl
	}
	return &registryv1.ImportCluster{ClusterId: cl.GetClusterId(), ExportCreateTime: cl.GetExportCreateTime(), ExportUpdateTime: cl.GetExportUpdateTime(), Conflicts: cl.GetConflicts(),
		MissingPorts: cl.GetMissingPorts(), ExcludedPorts: cl.GetExcludedPorts(), LeaseState: cl.GetLeaseState(), HeldRegion: cl.GetHeldRegion()}
}

// Snapshot is a clusterset's imports at one revision.
type Snapshot struct {
	Epoch    string
	Revision int64
	// Clusters is the number of registered clusters, expired or not.
	Clusters int
	// Imports sorted by namespace and name.
	Imports []*registryv1.ServiceImport
}

// List returns the imports of a clusterset. The returned messages are shared: do not change them.
func (c *Cache) List(ctx context.Context, clusterset string, f Filter) (Snapshot, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return Snapshot{}, err
	}
	s.mu.Lock()
	snap := Snapshot{Epoch: s.epoch, Revision: s.revision, Clusters: len(s.clusters), Imports: s.listLocked(f)}
	s.mu.Unlock()
	if snap.Clusters == 0 {
		c.release(s)
	}
	return snap, nil
}

// release forgets a loaded clusterset that has no cluster and no watcher, so reads of
// names nobody uses (typos, a clusterset whose last cluster left) cost no memory. A later
// read loads it again, under a new epoch.
func (c *Cache) release(s *set) {
	c.mu.Lock()
	s.mu.Lock()
	unused := c.sets[s.name] == s && s.clusters != nil && len(s.clusters) == 0 && len(s.watchers) == 0
	if unused {
		delete(c.sets, s.name)
	}
	s.mu.Unlock()
	c.mu.Unlock()
	if unused {
		s.close()
	}
}

// Import returns one Service's import, or nil when it has none.
func (c *Cache) Import(ctx context.Context, clusterset string, k store.ServiceKey) (*registryv1.ServiceImport, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.imports[k], nil
}
