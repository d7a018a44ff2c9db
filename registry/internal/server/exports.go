package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/merge"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// apply gives the cache a write's change, made from the write's result, before the write
// is answered (read-your-writes). A change the cache could not apply is logged by it, and
// its clusterset reloads on the next read, so the answer never comes from a stale import.
func (s *Server) apply(ctx context.Context, ch store.Change) {
	_ = s.cache.Apply(ctx, ch)
}

func serviceKey(k *registryv1.ServiceKey) store.ServiceKey {
	return store.ServiceKey{Namespace: k.GetNamespace(), Name: k.GetName()}
}

// PutExport implements RegistryServiceServer.
func (s *Server) PutExport(ctx context.Context, req *registryv1.PutExportRequest) (*registryv1.PutExportResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	validate.ServiceKey(&errs, "service", req.GetService())
	validate.ExportSpec(&errs, "spec", req.GetSpec())
	validate.EndpointGroups(&errs, "endpoint_groups", req.GetEndpointGroups())
	if err := invalid(errs); err != nil {
		return nil, err
	}
	key := store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId()}
	if err := s.activeCluster(ctx, key); err != nil {
		return nil, err
	}
	unlock, err := s.writes.lock(ctx, key)
	if err != nil {
		return nil, s.storeError("put export", err)
	}
	defer unlock()
	// The per-cluster quotas are checked by the store in the write itself, against what
	// it holds of the cluster through every replica (this replica's cache may lag).
	now := s.now()
	e, err := s.store.PutExport(ctx, store.Export{
		Clusterset: key.Clusterset, ClusterID: key.ClusterID, Service: serviceKey(req.GetService()),
		Spec: req.GetSpec(), EndpointGroups: req.GetEndpointGroups(), CreateTime: now, UpdateTime: now,
	})
	if err != nil {
		return nil, s.storeError("put export", err)
	}
	s.apply(ctx, store.ExportPut(e))
	imp, err := s.cache.Import(ctx, key.Clusterset, e.Service)
	if err != nil {
		return nil, s.storeError("read import", err)
	}
	return &registryv1.PutExportResponse{Export: exportProto(e, true), Verdict: merge.Verdict(imp, key.ClusterID)}, nil
}

func exportProto(e store.Export, withEndpoints bool) *registryv1.Export {
	out := &registryv1.Export{
		Clusterset: e.Clusterset, ClusterId: e.ClusterID,
		Service: &registryv1.ServiceKey{Namespace: e.Service.Namespace, Name: e.Service.Name},
		Spec:    e.Spec, CreateTime: timestamppb.New(e.CreateTime), UpdateTime: timestamppb.New(e.UpdateTime),
	}
	if withEndpoints {
		out.EndpointGroups = e.EndpointGroups
	}
	return out
}

// DeleteExport implements RegistryServiceServer.
func (s *Server) DeleteExport(ctx context.Context, req *registryv1.DeleteExportRequest) (*registryv1.DeleteExportResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	validate.ServiceKey(&errs, "service", req.GetService())
	if err := invalid(errs); err != nil {
		return nil, err
	}
	key := store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId()}
	// Like every write: a cluster whose lease expired may be a stale leader, and must
	// register (and sync) again before it changes anything.
	if err := s.activeCluster(ctx, key); err != nil {
		return nil, err
	}
	svc := serviceKey(req.GetService())
	unlock, err := s.writes.lock(ctx, key)
	if err != nil {
		return nil, s.storeError("delete export", err)
	}
	defer unlock()
	ok, err := s.store.DeleteExport(ctx, key, svc)
	if err != nil {
		return nil, s.storeError("delete export", err)
	}
	// Applied also when the store found nothing: a cache that holds the export (a change
	// it missed) reads the store and lets it go.
	s.apply(ctx, store.ExportDeleted(key, svc))
	return &registryv1.DeleteExportResponse{Deleted: ok}, nil
}

// SyncExports implements RegistryServiceServer.
func (s *Server) SyncExports(ctx context.Context, req *registryv1.SyncExportsRequest) (*registryv1.SyncExportsResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	if n := len(req.GetExports()); n > validate.MaxExportsPerSync {
		// Counts first: nothing of a request above the limit is looked at.
		errs.Add("exports", "%d exports, at most %d allowed", n, validate.MaxExportsPerSync)
		return nil, invalid(errs)
	}
	seen := map[store.ServiceKey]bool{}
	for i, x := range req.GetExports() {
		if errs.Full() {
			break
		}
		f := fmt.Sprintf("exports[%d]", i)
		validate.ServiceKey(&errs, f+".service", x.GetService())
		validate.ExportSpec(&errs, f+".spec", x.GetSpec())
		validate.EndpointGroups(&errs, f+".endpoint_groups", x.GetEndpointGroups())
		k := serviceKey(x.GetService())
		if seen[k] {
			errs.Add(f+".service", "%s appears more than once", k.String())
		}
		seen[k] = true
	}
	if err := invalid(errs); err != nil {
		return nil, err
	}
	key := store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId()}
	if err := s.activeCluster(ctx, key); err != nil {
		return nil, err
	}
	unlock, err := s.writes.lock(ctx, key)
	if err != nil {
		return nil, s.storeError("sync exports", err)
	}
	defer unlock()
	now := s.now()
	exports := make([]store.Export, len(req.GetExports()))
	for i, x := range req.GetExports() {
		exports[i] = store.Export{
			Clusterset: key.Clusterset, ClusterID: key.ClusterID, Service: serviceKey(x.GetService()),
			Spec: x.GetSpec(), EndpointGroups: x.GetEndpointGroups(), CreateTime: now, UpdateTime: now,
		}
	}
	stored, deleted, err := s.store.SyncExports(ctx, key, exports)
	if err != nil {
		return nil, s.storeError("sync exports", err)
	}
	// Applied in one step from the store's own result: the exports it holds now, and the
	// Services whose export it deleted (only those are read). Its cost follows the caller's
	// exports, not the clusterset's.
	s.apply(ctx, store.ExportsSynced(key, stored, deleted))
	resp := &registryv1.SyncExportsResponse{DeletedExports: int32(len(deleted))} //nolint:gosec // G115: at most --max-exports-per-cluster.
	for _, e := range exports {
		imp, err := s.cache.Import(ctx, key.Clusterset, e.Service)
		if err != nil {
			return nil, s.storeError("read import", err)
		}
		resp.Results = append(resp.Results, &registryv1.ExportResult{
			Service: &registryv1.ServiceKey{Namespace: e.Service.Namespace, Name: e.Service.Name},
			Verdict: merge.Verdict(imp, key.ClusterID),
		})
	}
	s.log.Info("exports synced", "clusterset", key.Clusterset, "cluster", key.ClusterID, "exports", len(exports), "deleted", len(deleted))
	return resp, nil
}

// clusterKnown: the cluster the list is of (none: false) is registered, so its clusterset
// is known without reading every cluster of it — one read where the cluster list grows with
// the fleet (a cluster that exports nothing yet checks its exports every minute).
func (s *Server) clusterKnown(ctx context.Context, clusterset, clusterID string) bool {
	if clusterID == "" {
		return false
	}
	_, err := s.store.GetCluster(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: clusterID})
	return err == nil
}

// ListExports implements RegistryServiceServer.
func (s *Server) ListExports(ctx context.Context, req *registryv1.ListExportsRequest) (*registryv1.ListExportsResponse, error) {
	if err := invalidRead(req.GetClusterset(), req.GetClusterId(), req.GetNamespace()); err != nil {
		return nil, err
	}
	var exports []store.Export
	var bad []store.Unreadable
	var err error
	if id := req.GetClusterId(); id != "" {
		// One cluster's: every controller's periodic check of its exports, whose cost
		// must not grow with the clusterset.
		exports, bad, err = s.store.ListClusterExports(ctx, store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: id})
	} else {
		exports, err = s.store.ListExports(ctx, req.GetClusterset())
		if err == nil {
			bad, err = s.store.ListUnreadable(ctx, req.GetClusterset())
		}
	}
	if err != nil {
		return nil, s.storeError("list exports", err)
	}
	if len(exports) == 0 && len(bad) == 0 && !s.clusterKnown(ctx, req.GetClusterset(), req.GetClusterId()) {
		// Only a registered cluster can export, so the cluster list is read only to tell
		// an unknown clusterset from one that exports nothing.
		clusters, err := s.store.ListClusters(ctx, req.GetClusterset())
		if err != nil {
			return nil, s.storeError("list clusters", err)
		}
		if len(clusters) == 0 {
			return nil, errClustersetUnknown(req.GetClusterset())
		}
	}
	wanted := func(clusterID string, svc store.ServiceKey) bool {
		return (req.GetClusterId() == "" || clusterID == req.GetClusterId()) && (req.GetNamespace() == "" || svc.Namespace == req.GetNamespace())
	}
	resp := &registryv1.ListExportsResponse{}
	for _, e := range exports {
		if wanted(e.ClusterID, e.Service) {
			resp.Exports = append(resp.Exports, exportProto(e, req.GetIncludeEndpoints()))
		}
	}
	for _, u := range bad {
		if wanted(u.ClusterID, u.Service) {
			item := &registryv1.UnreadableItem{Key: u.Key, ClusterId: u.ClusterID, Reason: u.Reason}
			if u.Service.Name != "" {
				item.Service = &registryv1.ServiceKey{Namespace: u.Service.Namespace, Name: u.Service.Name}
			}
			resp.Unreadable = append(resp.Unreadable, item)
		}
	}
	return resp, nil
}

// ListImports implements RegistryServiceServer.
func (s *Server) ListImports(ctx context.Context, req *registryv1.ListImportsRequest) (*registryv1.ListImportsResponse, error) {
	if err := invalidRead(req.GetClusterset(), "", req.GetNamespace()); err != nil {
		return nil, err
	}
	// Answered from the imports cache alone, the cluster count included, so a read of a
	// loaded clusterset costs the store nothing.
	snap, err := s.cache.List(ctx, req.GetClusterset(), imports.Filter{Namespace: req.GetNamespace(), IncludeEndpoints: req.GetIncludeEndpoints()})
	if err != nil {
		return nil, s.storeError("list imports", err)
	}
	if snap.Clusters == 0 {
		return nil, errClustersetUnknown(req.GetClusterset())
	}
	return &registryv1.ListImportsResponse{Imports: snap.Imports, Revision: snap.Revision, Epoch: snap.Epoch}, nil
}
