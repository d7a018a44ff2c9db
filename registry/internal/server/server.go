// Package server implements the registry's gRPC service over a store and the imports cache.
// It validates requests, turns store errors into gRPC statuses, and keeps no state of its own.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/merge"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Server is the RegistryService.
type Server struct {
	registryv1.UnimplementedRegistryServiceServer
	store store.Store
	cache *imports.Cache
	now   func() time.Time
	log   *slog.Logger
	// draining ends every watch when the process shuts down, so a graceful stop completes.
	draining <-chan struct{}
	limits   Limits
	refused  func(limit string)
	writes   clusterLocks
	watches  *watchLimits
}

// Options configure a Server.
type Options struct {
	Store store.Store
	Cache *imports.Cache
	// Now returns the current time; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Draining, when closed, ends open watches with UNAVAILABLE.
	Draining <-chan struct{}
	// Limits bound what one cluster holds.
	Limits Limits
	// Watch bounds the open watches and how long a send to one may block.
	Watch WatchLimits
	// Refused is told the name of a limit each time a request is refused for it; nil: nobody.
	Refused func(limit string)
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refused == nil {
		opts.Refused = func(string) {}
	}
	return &Server{store: opts.Store, cache: opts.Cache, now: opts.Now, log: opts.Logger, draining: opts.Draining,
		limits: opts.Limits, refused: opts.Refused, watches: newWatchLimits(opts.Watch)}
}

var _ registryv1.RegistryServiceServer = (*Server)(nil)

// maxStatusMessage bounds the message of an error status the registry sends.
const maxStatusMessage = 8 << 10

func invalid(errs validate.Errors) error {
	if err := errs.Err(); err != nil {
		msg := err.Error()
		if len(msg) > maxStatusMessage {
			msg = strings.ToValidUTF8(msg[:maxStatusMessage], "") + "…"
		}
		return status.Error(codes.InvalidArgument, msg)
	}
	return nil
}

// invalidRead checks the clusterset of a read and its optional cluster and namespace filters.
func invalidRead(clusterset, clusterID, namespace string) error {
	var errs validate.Errors
	validate.DNSLabel(&errs, "clusterset", clusterset)
	if clusterID != "" {
		validate.DNSLabel(&errs, "cluster_id", clusterID)
	}
	if namespace != "" {
		validate.DNSLabel(&errs, "namespace", namespace)
	}
	return invalid(errs)
}

// storeError maps a store error to a gRPC status.
func storeError(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrClusterNotFound):
		return status.Errorf(codes.FailedPrecondition, "%s: %v; register the cluster first", op, err)
	case errors.Is(err, store.ErrSuperseded):
		return status.Errorf(codes.Aborted, "%s: %v", op, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", op, err)
	default:
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	}
}

func clusterProto(c store.Cluster, now time.Time) *registryv1.Cluster {
	state := registryv1.LeaseState_LEASE_STATE_EXPIRED
	if c.Active(now) {
		state = registryv1.LeaseState_LEASE_STATE_ACTIVE
	}
	return &registryv1.Cluster{
		Clusterset: c.Clusterset, ClusterId: c.ClusterID, Region: c.Region,
		RegisterTime: timestamppb.New(c.RegisterTime),
		Lease: &registryv1.Lease{
			State: state, Duration: durationpb.New(c.LeaseDuration),
			RenewTime: timestamppb.New(c.RenewTime), ExpireTime: timestamppb.New(c.ExpireTime()),
		},
	}
}

// RegisterCluster implements RegistryServiceServer.
func (s *Server) RegisterCluster(ctx context.Context, req *registryv1.RegisterClusterRequest) (*registryv1.RegisterClusterResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	validate.Region(&errs, "region", req.GetRegion())
	lease := req.GetLeaseDuration().AsDuration()
	if req.GetLeaseDuration() != nil {
		if err := req.GetLeaseDuration().CheckValid(); err != nil {
			errs.Add("lease_duration", "%s", err.Error())
		}
	}
	validate.LeaseDuration(&errs, "lease_duration", lease)
	if err := invalid(errs); err != nil {
		return nil, err
	}
	if lease == 0 {
		lease = validate.DefaultLeaseDuration
	}
	now := s.now()
	c, err := s.store.RegisterCluster(ctx, store.Cluster{
		Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId(), Region: req.GetRegion(),
		LeaseDuration: lease, RegisterTime: now, RenewTime: now,
	})
	if err != nil {
		return nil, storeError("register cluster", err)
	}
	s.cache.SetCluster(c.Clusterset, c.ClusterID, &c)
	s.log.Info("cluster registered", "clusterset", c.Clusterset, "cluster", c.ClusterID, "region", c.Region, "lease", lease)
	return &registryv1.RegisterClusterResponse{Cluster: clusterProto(c, now)}, nil
}

// RenewLease implements RegistryServiceServer.
func (s *Server) RenewLease(ctx context.Context, req *registryv1.RenewLeaseRequest) (*registryv1.RenewLeaseResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	if err := invalid(errs); err != nil {
		return nil, err
	}
	now := s.now()
	c, err := s.store.RenewLease(ctx, store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId()}, now)
	if err != nil {
		return nil, storeError("renew lease", err)
	}
	s.cache.SetCluster(c.Clusterset, c.ClusterID, &c)
	return &registryv1.RenewLeaseResponse{Cluster: clusterProto(c, now)}, nil
}

func (s *Server) refreshService(ctx context.Context, clusterset string, k store.ServiceKey) {
	if err := s.cache.RefreshService(ctx, clusterset, k); err != nil {
		s.log.Warn("refreshing an import after an export write failed", "clusterset", clusterset, "service", k, "error", err)
	}
}

// ErrorDomain is the domain of the google.rpc.ErrorInfo details the registry sends.
const ErrorDomain = "registry.globaldiscoverymcs.ai-dynamo.github.com"

// errClustersetUnknown refuses a read of a clusterset in which no cluster is registered: the
// name is an invalid argument for this registry, and the detail tells a controller, apart
// from a malformed name, that the registry simply holds nothing of the clusterset.
func errClustersetUnknown(clusterset string) error {
	st := status.Newf(codes.InvalidArgument, "clusterset: %q is unknown: no cluster is registered in it", clusterset)
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String(),
		Domain:   ErrorDomain,
		Metadata: map[string]string{"clusterset": clusterset},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// ListClusters implements RegistryServiceServer.
func (s *Server) ListClusters(ctx context.Context, req *registryv1.ListClustersRequest) (*registryv1.ListClustersResponse, error) {
	if err := invalidRead(req.GetClusterset(), "", ""); err != nil {
		return nil, err
	}
	clusters, err := s.store.ListClusters(ctx, req.GetClusterset())
	if err != nil {
		return nil, storeError("list clusters", err)
	}
	if len(clusters) == 0 {
		return nil, errClustersetUnknown(req.GetClusterset())
	}
	now := s.now()
	resp := &registryv1.ListClustersResponse{}
	for _, c := range clusters {
		resp.Clusters = append(resp.Clusters, clusterProto(c, now))
	}
	return resp, nil
}

// DeleteCluster implements RegistryServiceServer.
func (s *Server) DeleteCluster(ctx context.Context, req *registryv1.DeleteClusterRequest) (*registryv1.DeleteClusterResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	if err := invalid(errs); err != nil {
		return nil, err
	}
	key := store.ClusterKey{Clusterset: req.GetClusterset(), ClusterID: req.GetClusterId()}
	n, err := s.store.DeleteCluster(ctx, key)
	if errors.Is(err, store.ErrClusterNotFound) {
		return nil, status.Errorf(codes.NotFound, "cluster_id: %q is not registered in clusterset %q", key.ClusterID, key.Clusterset)
	}
	if err != nil {
		return nil, storeError("delete cluster", err)
	}
	if err := s.cache.Resync(ctx, key.Clusterset); err != nil {
		s.log.Warn("refreshing imports after a cluster deletion failed", "clusterset", key.Clusterset, "error", err)
	}
	s.log.Info("cluster deleted", "clusterset", key.Clusterset, "cluster", key.ClusterID, "exports", n)
	return &registryv1.DeleteClusterResponse{DeletedExports: int32(n)}, nil
}

// activeCluster refuses writes from a cluster that is not registered or whose lease expired.
func (s *Server) activeCluster(ctx context.Context, key store.ClusterKey) error {
	c, err := s.store.GetCluster(ctx, key)
	if err != nil {
		return storeError("check cluster lease", err)
	}
	if now := s.now(); !c.Active(now) {
		return status.Errorf(codes.FailedPrecondition, "cluster %s/%s: lease expired at %s; register again", key.Clusterset, key.ClusterID, c.ExpireTime().UTC().Format(time.RFC3339))
	}
	return nil
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
		return nil, storeError("put export", err)
	}
	defer unlock()
	u, err := s.cache.ClusterUsage(ctx, key.Clusterset, key.ClusterID, serviceKey(req.GetService()))
	if err != nil {
		return nil, storeError("read the cluster's exports", err)
	}
	u.Exports++
	u.Endpoints += validate.EndpointCount(req.GetEndpointGroups())
	if err := s.overQuota(key, u); err != nil {
		return nil, err
	}
	now := s.now()
	e, err := s.store.PutExport(ctx, store.Export{
		Clusterset: key.Clusterset, ClusterID: key.ClusterID, Service: serviceKey(req.GetService()),
		Spec: req.GetSpec(), EndpointGroups: req.GetEndpointGroups(), CreateTime: now, UpdateTime: now,
	})
	if err != nil {
		return nil, storeError("put export", err)
	}
	s.cache.ApplyPut(key.Clusterset, e)
	imp, err := s.cache.Import(ctx, key.Clusterset, e.Service)
	if err != nil {
		return nil, storeError("read import", err)
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
		return nil, storeError("delete export", err)
	}
	defer unlock()
	ok, err := s.store.DeleteExport(ctx, key, svc)
	if err != nil {
		return nil, storeError("delete export", err)
	}
	s.refreshService(ctx, key.Clusterset, svc)
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
	// The synced set replaces everything the cluster holds: the quota is the request's.
	u := imports.Usage{Exports: len(req.GetExports())}
	for _, x := range req.GetExports() {
		u.Endpoints += validate.EndpointCount(x.GetEndpointGroups())
	}
	if err := s.overQuota(key, u); err != nil {
		return nil, err
	}
	unlock, err := s.writes.lock(ctx, key)
	if err != nil {
		return nil, storeError("sync exports", err)
	}
	defer unlock()
	// What the sync changes: the Services it names and those the cluster exported before.
	before, err := s.cache.ServicesOf(ctx, key.Clusterset, key.ClusterID)
	if err != nil {
		return nil, storeError("read the cluster's exports", err)
	}
	now := s.now()
	exports := make([]store.Export, len(req.GetExports()))
	for i, x := range req.GetExports() {
		exports[i] = store.Export{
			Clusterset: key.Clusterset, ClusterID: key.ClusterID, Service: serviceKey(x.GetService()),
			Spec: x.GetSpec(), EndpointGroups: x.GetEndpointGroups(), CreateTime: now, UpdateTime: now,
		}
	}
	_, deleted, err := s.store.SyncExports(ctx, key, exports)
	if err != nil {
		return nil, storeError("sync exports", err)
	}
	// Applied as the changes it makes, in one step: its cost follows the caller's exports,
	// not the clusterset's.
	changed := make([]store.ServiceKey, 0, len(exports)+len(before))
	for _, e := range exports {
		changed = append(changed, e.Service)
	}
	for _, k := range before {
		if !seen[k] {
			changed = append(changed, k)
		}
	}
	if err := s.cache.RefreshServices(ctx, key.Clusterset, changed); err != nil {
		s.log.Warn("refreshing imports after a sync failed", "clusterset", key.Clusterset, "error", err)
	}
	resp := &registryv1.SyncExportsResponse{DeletedExports: int32(deleted)}
	for _, e := range exports {
		imp, err := s.cache.Import(ctx, key.Clusterset, e.Service)
		if err != nil {
			return nil, storeError("read import", err)
		}
		resp.Results = append(resp.Results, &registryv1.ExportResult{
			Service: &registryv1.ServiceKey{Namespace: e.Service.Namespace, Name: e.Service.Name},
			Verdict: merge.Verdict(imp, key.ClusterID),
		})
	}
	s.log.Info("exports synced", "clusterset", key.Clusterset, "cluster", key.ClusterID, "exports", len(exports), "deleted", deleted)
	return resp, nil
}

// ListExports implements RegistryServiceServer.
func (s *Server) ListExports(ctx context.Context, req *registryv1.ListExportsRequest) (*registryv1.ListExportsResponse, error) {
	if err := invalidRead(req.GetClusterset(), req.GetClusterId(), req.GetNamespace()); err != nil {
		return nil, err
	}
	exports, err := s.store.ListExports(ctx, req.GetClusterset())
	if err != nil {
		return nil, storeError("list exports", err)
	}
	if len(exports) == 0 {
		// Only a registered cluster can export, so the cluster list is read only to tell
		// an unknown clusterset from one that exports nothing.
		clusters, err := s.store.ListClusters(ctx, req.GetClusterset())
		if err != nil {
			return nil, storeError("list clusters", err)
		}
		if len(clusters) == 0 {
			return nil, errClustersetUnknown(req.GetClusterset())
		}
	}
	resp := &registryv1.ListExportsResponse{}
	for _, e := range exports {
		if (req.GetClusterId() == "" || e.ClusterID == req.GetClusterId()) && (req.GetNamespace() == "" || e.Service.Namespace == req.GetNamespace()) {
			resp.Exports = append(resp.Exports, exportProto(e, req.GetIncludeEndpoints()))
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
		return nil, storeError("list imports", err)
	}
	if snap.Clusters == 0 {
		return nil, errClustersetUnknown(req.GetClusterset())
	}
	return &registryv1.ListImportsResponse{Imports: snap.Imports, Revision: snap.Revision, Epoch: snap.Epoch}, nil
}
