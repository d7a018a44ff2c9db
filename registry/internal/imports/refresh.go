package imports

import (
	"context"
	"errors"
	"fmt"
	"sort"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// RefreshService reads one Service's exports from the store and recomputes its import.
func (c *Cache) RefreshService(ctx context.Context, clusterset string, k store.ServiceKey) error {
	return c.RefreshServices(ctx, clusterset, []store.ServiceKey{k})
}

// RefreshServices reads several Services' exports from the store and recomputes their
// imports in one step: a watcher sees all of the new imports or none of them (a cluster's
// SyncExports, which the controllers' hold after a registry restart relies on).
func (c *Cache) RefreshServices(ctx context.Context, clusterset string, keys []store.ServiceKey) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	return s.commit.do(ctx, keys, nil, s.refreshServices)
}

// ApplySync applies a cluster's SyncExports: written are the exports as the store holds
// them after it (applied from the write's result, without a read, by the rule of ApplyPut),
// gone the Services whose export of the cluster it deleted (read from the store). In one
// step, and in the group commit: many clusters' syncs at once (a registry restart) merge
// each Service once per batch, not once per sync.
func (c *Cache) ApplySync(ctx context.Context, clusterset string, written []store.Export, gone []store.ServiceKey) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	return s.commit.do(ctx, gone, written, s.refreshServices)
}

// ApplyPut applies an export this replica has just written, from the write's own result,
// without reading the store (read-your-writes at no cost). An entry of the same cluster
// that is newer (a later write that reached the cache first) is kept. Under the refresh
// lock, so no refresh that read the store before the write can apply after it.
func (c *Cache) ApplyPut(clusterset string, e store.Export) {
	s := c.existing(clusterset)
	if s == nil {
		return
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	now := c.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		return
	}
	if next, ok := placed(s.exports[e.Service], e); ok {
		s.setExportsLocked(e.Service, next)
		s.recomputeLocked(e.Service, now)
	}
}

// placed returns held (one Service's exports, sorted by cluster) with e in its cluster's
// place, and false when held has it already or a newer write of its cluster.
func placed(held []store.Export, e store.Export) ([]store.Export, bool) {
	return placedAll(held, []store.Export{e})
}

// placedAll places each of es (writes of one Service, one per cluster) as placed does, in
// one copy of held.
func placedAll(held []store.Export, es []store.Export) ([]store.Export, bool) {
	next := make([]store.Export, len(held), len(held)+len(es))
	copy(next, held)
	// One write (a PutExport) looks its cluster up in a scan; many, in an index.
	var at map[string]int
	if len(es) > 1 {
		at = make(map[string]int, len(held)+len(es))
		for i, x := range held {
			at[x.ClusterID] = i
		}
	}
	find := func(id string) (int, bool) {
		if at != nil {
			i, ok := at[id]
			return i, ok
		}
		for i, x := range next {
			if x.ClusterID == id {
				return i, true
			}
		}
		return 0, false
	}
	changed, grown := false, false
	for _, e := range es {
		i, ok := find(e.ClusterID)
		if !ok {
			if at != nil {
				at[e.ClusterID] = len(next)
			}
			next = append(next, e)
			changed, grown = true, true
			continue
		}
		x := next[i]
		switch {
		case x.UpdateTime.After(e.UpdateTime):
			// a newer write is held
		case x.UpdateTime.Equal(e.UpdateTime) && x.Spec == e.Spec && sameGroups(x.EndpointGroups, e.EndpointGroups):
			// this write is held: its echo reached the cache first
		default:
			next[i] = e
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	if grown {
		sort.Slice(next, func(i, j int) bool { return next[i].ClusterID < next[j].ClusterID })
	}
	return next, true
}

// unapplied returns the Services whose state after a change (the cluster's exports in
// after; a Service absent from it: the cluster's export is gone) the cache does not hold
// yet: those need a read. A held entry of the cluster as new as the change's, or none for
// a gone export, means the change — or a later one — is applied. An unloaded clusterset
// needs nothing.
func (c *Cache) unapplied(clusterset, clusterID string, keys []store.ServiceKey, after []store.Export) []store.ServiceKey {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	written := make(map[store.ServiceKey]store.Export, len(after))
	for _, e := range after {
		written[e.Service] = e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		return keys // not loaded yet: the refresh path knows what to do
	}
	var out []store.ServiceKey
	for _, k := range keys {
		var held *store.Export
		for i := range s.exports[k] {
			if s.exports[k][i].ClusterID == clusterID {
				held = &s.exports[k][i]
				break
			}
		}
		e, put := written[k]
		switch {
		case put && held != nil && !held.UpdateTime.Before(e.UpdateTime):
		case !put && held == nil:
		default:
			out = append(out, k)
		}
	}
	return out
}

// sameGroups: the same endpoint group messages (the write's own, shared with its echo).
func sameGroups(a, b []*registryv1.EndpointGroup) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RefreshCluster reads one cluster from the store; when its lease state changed, the
// imports of its Services are recomputed.
func (c *Cache) RefreshCluster(ctx context.Context, clusterset, clusterID string) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	cl, err := c.store.GetCluster(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: clusterID})
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrClusterNotFound) {
		return fmt.Errorf("get cluster %s/%s: %w", clusterset, clusterID, err)
	}
	s.setCluster(clusterID, cl, found)
	return nil
}

// SetCluster applies a cluster's state known without reading the store (a write's
// result, a stream image); nil means deleted. A state older than the one held (by renew
// time) is ignored, so a late stream record cannot undo a newer write.
func (c *Cache) SetCluster(clusterset, clusterID string, cl *store.Cluster) {
	s := c.existing(clusterset)
	if s == nil {
		return
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	if cl == nil {
		s.setCluster(clusterID, store.Cluster{}, false)
		return
	}
	s.mu.Lock()
	held, ok := s.clusters[clusterID]
	s.mu.Unlock()
	if ok && held.RenewTime.After(cl.RenewTime) {
		return
	}
	s.setCluster(clusterID, *cl, true)
}

// Resync reloads a clusterset from the store (every loaded one when name is empty).
func (c *Cache) Resync(ctx context.Context, name string) error {
	c.mu.Lock()
	var sets []*set
	for n, s := range c.sets {
		if name == "" || n == name {
			sets = append(sets, s)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, s := range sets {
		s.refresh.Lock()
		if err := s.reload(ctx); err != nil {
			errs = append(errs, err)
		}
		s.refresh.Unlock()
	}
	return errors.Join(errs...)
}
