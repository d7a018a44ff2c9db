package imports

import (
	"context"
	"errors"
	"fmt"
	"sort"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Apply brings one change into the cache, and is the only way a change reaches it: the
// store's change feed reports every replica's writes in it (Run), and the server applies
// its own write's result in it before it answers (read-your-writes), built by the store's
// constructors from that result (store.ExportPut and the others). A change whose exports
// are whole is placed as it is; one that names what changed reads the store for what the
// cache does not hold yet, so the echo of a write applied already costs nothing. A change
// the cache cannot apply (a failed read) drops its clusterset, so the next use reloads it
// rather than answer from a stale import; the error is logged and returned.
func (c *Cache) Apply(ctx context.Context, ch store.Change) error {
	var err error
	switch ch.Kind {
	case store.ChangeCluster:
		switch {
		case ch.Deleted:
			c.setCluster(ch.Clusterset, ch.ClusterID, nil)
		case ch.Cluster != nil:
			c.setCluster(ch.Clusterset, ch.ClusterID, ch.Cluster)
		default:
			err = c.refreshCluster(ctx, ch.Clusterset, ch.ClusterID)
		}
	case store.ChangeExport:
		if s := c.existing(ch.Clusterset); s != nil {
			if read, place := s.needs(ch); len(read) > 0 || len(place) > 0 {
				// In the group commit: many clusters' syncs at once (a registry restart)
				// merge each Service once per batch, and a watcher sees all of one
				// change or none of it.
				if err = s.commit.do(ctx, read, place, s.applyBatch); err != nil {
					// The batch that failed dropped the set; a caller that left has no
					// failure of its own (the batch it joined applies its change).
					return fmt.Errorf("apply change to clusterset %q: %w", ch.Clusterset, err)
				}
			}
		}
	case store.ChangeResync:
		err = c.resync(ctx, ch.Clusterset)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The caller left (an admin's DeleteCluster cancelled during the reload): the
		// change feed brings the change, and a new epoch would cost every watcher a
		// snapshot it does not need.
		return fmt.Errorf("apply change to clusterset %q: %w", ch.Clusterset, err)
	}
	c.log.Warn("applying a store change failed; the clusterset reloads on its next use", "clusterset", ch.Clusterset, "error", err)
	c.drop(ch.Clusterset)
	return fmt.Errorf("apply change to clusterset %q: %w", ch.Clusterset, err)
}

// applyBatch applies one batch of the group commit; a batch that fails drops the set, once,
// whichever of its callers still wait: the next use loads it again. (A caller that stops
// waiting, a client that cancelled its write, drops nothing: dropping starts a new epoch
// for every watcher, which controllers take for a registry restart.)
func (s *set) applyBatch(ctx context.Context, keys []store.ServiceKey, known []store.Export) error {
	err := s.refreshServices(ctx, keys, known)
	if err != nil {
		s.cache.log.Warn("applying store changes failed; the clusterset reloads on its next use", "clusterset", s.name, "error", err)
		s.cache.dropSet(s)
	}
	return err
}

// needs splits an export change into the Services to read from the store and the exports
// to place as they are. Whole exports are placed (placing keeps a newer write of the
// cluster, and one held already changes nothing). Otherwise a Service is read unless the
// cache holds the state after the change already: an export of the cluster as new as the
// change's, or none for a gone export. A clusterset still loading reads what it cannot
// place (its load holds the refresh lock, so the read lands after it).
func (s *set) needs(ch store.Change) (read []store.ServiceKey, place []store.Export) {
	keys := ch.Keys()
	if !ch.Known {
		return keys, nil
	}
	if ch.Whole {
		// Placed in the batch, where placing what is held changes nothing. The rest is
		// looked at only for a gone export: a batch holds the lock while it merges, and a
		// write that waited for it would miss the batch it could have joined.
		place = ch.Exports
		if len(keys) == len(place) {
			return nil, place
		}
	}
	written := make(map[store.ServiceKey]store.Export, len(ch.Exports))
	for _, e := range ch.Exports {
		written[e.Service] = e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	loaded := s.clusters != nil
	for _, k := range keys {
		e, put := written[k]
		if put && ch.Whole {
			continue
		}
		held := s.heldLocked(k, ch.ClusterID)
		switch {
		case !loaded:
			read = append(read, k)
		case put && held != nil && !held.UpdateTime.Before(e.UpdateTime):
		case !put && held == nil:
		default:
			read = append(read, k)
		}
	}
	return read, place
}

// heldLocked returns the cluster's export of the Service that the cache holds, or nil.
func (s *set) heldLocked(k store.ServiceKey, clusterID string) *store.Export {
	for i := range s.exports[k] {
		if s.exports[k][i].ClusterID == clusterID {
			return &s.exports[k][i]
		}
	}
	return nil
}

// placed returns held (one Service's exports, sorted by cluster) with each of es (writes
// of the Service, one per cluster) in its cluster's place, in one copy of held, and false
// when held holds every one of them already (holds): the echo of a write placed already
// costs a look-up, not a copy.
func placed(held []store.Export, es []store.Export) ([]store.Export, bool) {
	// One write (a PutExport) looks its cluster up in a scan; many, in an index.
	var at map[string]int
	if len(es) > 1 {
		at = make(map[string]int, len(held)+len(es))
		for i, x := range held {
			at[x.ClusterID] = i
		}
	}
	var next []store.Export // a copy of held, made at the first change
	find := func(id string) (int, bool) {
		if at != nil {
			i, ok := at[id]
			return i, ok
		}
		for i, x := range held {
			if x.ClusterID == id {
				return i, true
			}
		}
		return 0, false
	}
	grown := false
	for _, e := range es {
		i, ok := find(e.ClusterID)
		if ok && holds(current(held, next, i), e) {
			continue
		}
		if next == nil {
			next = make([]store.Export, len(held), len(held)+len(es))
			copy(next, held)
		}
		if ok {
			next[i] = e
			continue
		}
		if at != nil {
			at[e.ClusterID] = len(next)
		}
		next = append(next, e)
		grown = true
	}
	if next == nil {
		return nil, false
	}
	if grown {
		sort.Slice(next, func(i, j int) bool { return next[i].ClusterID < next[j].ClusterID })
	}
	return next, true
}

// current is the export at i: in next once it is copied (it may hold an earlier placed
// write), else in held.
func current(held, next []store.Export, i int) store.Export {
	if next != nil {
		return next[i]
	}
	return held[i]
}

// holds says that held, the cache's export of a cluster, makes placing e (a whole write of
// the same cluster and Service) change nothing: held is a newer write, or e itself (its
// echo reached the cache first).
func holds(held, e store.Export) bool {
	switch {
	case held.UpdateTime.After(e.UpdateTime):
		return true
	case held.UpdateTime.Equal(e.UpdateTime) && held.Spec == e.Spec && sameGroups(held.EndpointGroups, e.EndpointGroups):
		return true
	}
	return false
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

// refreshCluster reads one cluster from the store; when its lease state changed, the
// imports of its Services are recomputed.
func (c *Cache) refreshCluster(ctx context.Context, clusterset, clusterID string) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	since := s.readStart()
	cl, err := c.store.GetCluster(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: clusterID})
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrClusterNotFound) {
		return fmt.Errorf("get cluster %s/%s: %w", clusterset, clusterID, err)
	}
	s.setRead(clusterID, cl, found, since)
	return nil
}

// setCluster applies a cluster's state known without reading the store (a write's
// result, a stream image); nil means deleted. A state older than the one held (by renew
// time) is ignored, so a late stream record cannot undo a newer write.
func (c *Cache) setCluster(clusterset, clusterID string, cl *store.Cluster) {
	if s := c.existing(clusterset); s != nil {
		s.applyKnown(clusterID, cl)
	}
}

// resync reloads a clusterset from the store (every loaded one when name is empty).
func (c *Cache) resync(ctx context.Context, name string) error {
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
