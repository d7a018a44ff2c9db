// Package memory is the in-process registry store: one registry replica, every record lost
// on restart. Controllers register again on their next heartbeat and send their exports
// again.
package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Store is the memory store. The zero value is not usable; call New.
type Store struct {
	mu          sync.RWMutex
	clustersets map[string]*clusterset
	feed        store.Feed
	quota       store.Quota
}

type clusterset struct {
	clusters map[string]store.Cluster
	// exports by service, then cluster id.
	exports map[store.ServiceKey]map[string]store.Export
	// usage is what each cluster holds, kept with every write.
	usage map[string]store.Usage
}

var _ store.Store = (*Store)(nil)

// Option configures New.
type Option func(*Store)

// WithQuota bounds what each cluster may hold.
func WithQuota(q store.Quota) Option { return func(s *Store) { s.quota = q } }

// New returns an empty memory store.
func New(opts ...Option) *Store {
	s := &Store{clustersets: map[string]*clusterset{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Store) set(name string, create bool) *clusterset {
	cs := s.clustersets[name]
	if cs == nil && create {
		cs = &clusterset{clusters: map[string]store.Cluster{}, exports: map[store.ServiceKey]map[string]store.Export{}, usage: map[string]store.Usage{}}
		s.clustersets[name] = cs
	}
	return cs
}

// RegisterCluster implements store.Store.
func (s *Store) RegisterCluster(_ context.Context, c store.Cluster) (store.Cluster, error) {
	s.mu.Lock()
	cs := s.set(c.Clusterset, true)
	if old, ok := cs.clusters[c.ClusterID]; ok {
		c.RegisterTime = old.RegisterTime
	}
	cs.clusters[c.ClusterID] = c
	s.mu.Unlock()
	s.feed.Publish(store.ClusterWritten(c))
	return c, nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(_ context.Context, key store.ClusterKey, now time.Time) (store.Cluster, error) {
	s.mu.Lock()
	cs := s.set(key.Clusterset, false)
	var c store.Cluster
	ok := false
	if cs != nil {
		c, ok = cs.clusters[key.ClusterID]
	}
	if !ok {
		s.mu.Unlock()
		return store.Cluster{}, fmt.Errorf("renew %s/%s: %w", key.Clusterset, key.ClusterID, store.ErrClusterNotFound)
	}
	c.RenewTime = now
	cs.clusters[key.ClusterID] = c
	s.mu.Unlock()
	s.feed.Publish(store.ClusterWritten(c))
	return c, nil
}

// GetCluster implements store.Store.
func (s *Store) GetCluster(_ context.Context, key store.ClusterKey) (store.Cluster, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if cs := s.set(key.Clusterset, false); cs != nil {
		if c, ok := cs.clusters[key.ClusterID]; ok {
			return c, nil
		}
	}
	return store.Cluster{}, fmt.Errorf("get %s/%s: %w", key.Clusterset, key.ClusterID, store.ErrClusterNotFound)
}

// ListClusters implements store.Store.
func (s *Store) ListClusters(_ context.Context, clustersetName string) ([]store.Cluster, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cs := s.set(clustersetName, false)
	if cs == nil {
		return nil, nil
	}
	out := make([]store.Cluster, 0, len(cs.clusters))
	for _, c := range cs.clusters {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClusterID < out[j].ClusterID })
	return out, nil
}

// DeleteCluster implements store.Store.
func (s *Store) DeleteCluster(_ context.Context, key store.ClusterKey) (int, error) {
	s.mu.Lock()
	cs := s.set(key.Clusterset, false)
	if cs == nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("delete %s/%s: %w", key.Clusterset, key.ClusterID, store.ErrClusterNotFound)
	}
	if _, ok := cs.clusters[key.ClusterID]; !ok {
		s.mu.Unlock()
		return 0, fmt.Errorf("delete %s/%s: %w", key.Clusterset, key.ClusterID, store.ErrClusterNotFound)
	}
	delete(cs.clusters, key.ClusterID)
	delete(cs.usage, key.ClusterID)
	var removed []store.ServiceKey
	for svc, byCluster := range cs.exports {
		if _, ok := byCluster[key.ClusterID]; ok {
			delete(byCluster, key.ClusterID)
			removed = append(removed, svc)
			if len(byCluster) == 0 {
				delete(cs.exports, svc)
			}
		}
	}
	if len(cs.clusters) == 0 && len(cs.exports) == 0 {
		delete(s.clustersets, key.Clusterset)
	}
	s.mu.Unlock()
	for _, svc := range removed {
		s.feed.Publish(store.ExportDeleted(key, svc).Reported())
	}
	s.feed.Publish(store.ClusterDeleted(key))
	return len(removed), nil
}

// putLocked writes one export; the caller holds s.mu and has checked the cluster exists.
func putLocked(cs *clusterset, e store.Export) store.Export {
	byCluster := cs.exports[e.Service]
	if byCluster == nil {
		byCluster = map[string]store.Export{}
		cs.exports[e.Service] = byCluster
	}
	u := cs.usage[e.ClusterID]
	if old, ok := byCluster[e.ClusterID]; ok {
		e.CreateTime = old.CreateTime
		u = u.Sub(store.Weight(old.Spec, old.EndpointGroups))
	}
	byCluster[e.ClusterID] = e
	cs.usage[e.ClusterID] = u.Add(store.Weight(e.Spec, e.EndpointGroups))
	return e
}

// deleteLocked removes one export of a cluster, when there is one.
func deleteLocked(cs *clusterset, svc store.ServiceKey, clusterID string) bool {
	byCluster, ok := cs.exports[svc]
	if !ok {
		return false
	}
	old, ok := byCluster[clusterID]
	if !ok {
		return false
	}
	delete(byCluster, clusterID)
	if len(byCluster) == 0 {
		delete(cs.exports, svc)
	}
	cs.usage[clusterID] = cs.usage[clusterID].Sub(store.Weight(old.Spec, old.EndpointGroups))
	return true
}

func (s *Store) registeredLocked(key store.ClusterKey) (*clusterset, error) {
	cs := s.set(key.Clusterset, false)
	if cs == nil {
		return nil, store.ErrClusterNotFound
	}
	if _, ok := cs.clusters[key.ClusterID]; !ok {
		return nil, store.ErrClusterNotFound
	}
	return cs, nil
}

// abandoned returns the context's error when the caller gave up. Checked under the lock,
// just before a write applies: a write whose caller's deadline passed (or who cancelled)
// never applies after a later write or delete of the same caller, which took the lock
// after the deadline.
func abandoned(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: not applied, the caller gave up: %w", op, err)
	}
	return nil
}

// PutExport implements store.Store.
func (s *Store) PutExport(ctx context.Context, e store.Export) (store.Export, error) {
	s.mu.Lock()
	if err := abandoned(ctx, "put export"); err != nil {
		s.mu.Unlock()
		return store.Export{}, err
	}
	cs, err := s.registeredLocked(e.ClusterKey())
	if err != nil {
		s.mu.Unlock()
		return store.Export{}, fmt.Errorf("put export %s from %s/%s: %w", e.Service, e.Clusterset, e.ClusterID, err)
	}
	after := cs.usage[e.ClusterID].Add(store.Weight(e.Spec, e.EndpointGroups))
	if old, ok := cs.exports[e.Service][e.ClusterID]; ok {
		after = after.Sub(store.Weight(old.Spec, old.EndpointGroups))
	}
	if err := s.quota.Check(e.ClusterKey(), after); err != nil {
		s.mu.Unlock()
		return store.Export{}, fmt.Errorf("put export %s: %w", e.Service, err)
	}
	e = putLocked(cs, e)
	s.mu.Unlock()
	s.feed.Publish(store.ExportPut(e).Reported())
	return e, nil
}

// DeleteExport implements store.Store.
func (s *Store) DeleteExport(ctx context.Context, key store.ClusterKey, svc store.ServiceKey) (bool, error) {
	s.mu.Lock()
	if err := abandoned(ctx, "delete export"); err != nil {
		s.mu.Unlock()
		return false, err
	}
	cs := s.set(key.Clusterset, false)
	found := cs != nil && deleteLocked(cs, svc, key.ClusterID)
	s.mu.Unlock()
	if found {
		s.feed.Publish(store.ExportDeleted(key, svc).Reported())
	}
	return found, nil
}

// SyncExports implements store.Store.
func (s *Store) SyncExports(ctx context.Context, key store.ClusterKey, exports []store.Export) ([]store.Export, []store.ServiceKey, error) {
	s.mu.Lock()
	if err := abandoned(ctx, "sync exports"); err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	cs, err := s.registeredLocked(key)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("sync exports of %s/%s: %w", key.Clusterset, key.ClusterID, err)
	}
	// The synced set replaces everything the cluster holds, at once.
	var after store.Usage
	for _, e := range exports {
		after = after.Add(store.Weight(e.Spec, e.EndpointGroups))
	}
	if err := s.quota.Check(key, after); err != nil {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("sync exports: %w", err)
	}
	keep := make(map[store.ServiceKey]bool, len(exports))
	stored := make([]store.Export, len(exports))
	for i, e := range exports {
		stored[i] = putLocked(cs, e)
		keep[e.Service] = true
	}
	var deleted []store.ServiceKey
	for svc := range cs.exports {
		if !keep[svc] && deleteLocked(cs, svc, key.ClusterID) {
			deleted = append(deleted, svc)
		}
	}
	s.mu.Unlock()
	// One change for the whole sync: the cache shows a cluster's synced exports at once.
	s.feed.Publish(store.ExportsSynced(key, stored, deleted).Reported())
	return stored, deleted, nil
}

// ListExports implements store.Store.
func (s *Store) ListExports(_ context.Context, clustersetName string) ([]store.Export, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cs := s.set(clustersetName, false)
	if cs == nil {
		return nil, nil
	}
	var out []store.Export
	for _, byCluster := range cs.exports {
		for _, e := range byCluster {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service.Less(out[j].Service)
		}
		return out[i].ClusterID < out[j].ClusterID
	})
	return out, nil
}

// ListClusterExports implements store.Store: one look-up per Service of the clusterset.
func (s *Store) ListClusterExports(_ context.Context, key store.ClusterKey) ([]store.Export, []store.Unreadable, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cs := s.set(key.Clusterset, false)
	if cs == nil {
		return nil, nil, nil
	}
	var out []store.Export
	for _, byCluster := range cs.exports {
		if e, ok := byCluster[key.ClusterID]; ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service.Less(out[j].Service) })
	return out, nil, nil
}

// ListServiceExports implements store.Store.
func (s *Store) ListServiceExports(_ context.Context, clustersetName string, svc store.ServiceKey) ([]store.Export, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cs := s.set(clustersetName, false)
	if cs == nil {
		return nil, nil
	}
	out := make([]store.Export, 0, len(cs.exports[svc]))
	for _, e := range cs.exports[svc] {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClusterID < out[j].ClusterID })
	return out, nil
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context) (<-chan store.Change, error) {
	return s.feed.Subscribe(ctx), nil
}

// Ping implements store.Store: the memory store is always reachable.
func (s *Store) Ping(context.Context) error { return nil }

// ListUnreadable implements store.Store: the memory store holds decoded values only, so
// nothing in it is unreadable.
func (s *Store) ListUnreadable(context.Context, string) ([]store.Unreadable, error) { return nil, nil }
