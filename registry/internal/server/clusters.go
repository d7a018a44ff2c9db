package server

import (
	"context"
	"errors"
	"sort"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/lease"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// clusterProto is a cluster with its lease as this replica judges it.
func clusterProto(c store.Cluster, v lease.Verdict) *registryv1.Cluster {
	var lag *durationpb.Duration
	if v.State == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION {
		lag = durationpb.New(v.Lag)
	}
	return &registryv1.Cluster{
		Clusterset: c.Clusterset, ClusterId: c.ClusterID, Region: c.Region,
		RegisterTime: timestamppb.New(c.RegisterTime), ControllerVersion: c.ControllerVersion,
		Lease: &registryv1.Lease{
			State: v.State, Duration: durationpb.New(c.LeaseDuration),
			RenewTime: timestamppb.New(c.RenewTime), ExpireTime: timestamppb.New(c.ExpireTime()),
			RenewRegion: c.RenewRegion, ReplicationLag: lag,
		},
	}
}

// RegisterCluster implements RegistryServiceServer.
func (s *Server) RegisterCluster(ctx context.Context, req *registryv1.RegisterClusterRequest) (*registryv1.RegisterClusterResponse, error) {
	var errs validate.Errors
	validate.ClusterKey(&errs, req.GetClusterset(), req.GetClusterId())
	validate.Region(&errs, "region", req.GetRegion())
	validate.Version(&errs, "controller_version", req.GetControllerVersion())
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
		LeaseDuration: lease, RegisterTime: now, RenewTime: now, ControllerVersion: req.GetControllerVersion(),
	})
	if err != nil {
		return nil, s.storeError("register cluster", err)
	}
	s.apply(ctx, store.ClusterWritten(c))
	s.log.Info("cluster registered", "clusterset", c.Clusterset, "cluster", c.ClusterID, "region", c.Region, "lease", lease)
	return &registryv1.RegisterClusterResponse{Cluster: clusterProto(c, s.cache.Judge(c))}, nil
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
		return nil, s.storeError("renew lease", err)
	}
	s.apply(ctx, store.ClusterWritten(c))
	return &registryv1.RenewLeaseResponse{Cluster: clusterProto(c, s.cache.Judge(c))}, nil
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
		return nil, s.storeError("list clusters", err)
	}
	if len(clusters) == 0 {
		return nil, errClustersetUnknown(req.GetClusterset())
	}
	resp := &registryv1.ListClustersResponse{RegistryVersion: buildinfo.Version}
	var lags map[string]time.Duration
	resp.Region, lags = s.cache.Replication()
	for region, lag := range lags {
		resp.ReplicationLags = append(resp.ReplicationLags, &registryv1.ReplicationLag{SourceRegion: region, Lag: durationpb.New(lag)})
	}
	sort.Slice(resp.ReplicationLags, func(i, j int) bool {
		return resp.ReplicationLags[i].GetSourceRegion() < resp.ReplicationLags[j].GetSourceRegion()
	})
	for _, c := range clusters {
		resp.Clusters = append(resp.Clusters, clusterProto(c, s.cache.Judge(c)))
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
		return nil, s.storeError("delete cluster", err)
	}
	s.apply(ctx, store.Resync(key.Clusterset))
	s.log.Info("cluster deleted", "clusterset", key.Clusterset, "cluster", key.ClusterID, "exports", n)
	return &registryv1.DeleteClusterResponse{DeletedExports: int32(n)}, nil //nolint:gosec // G115: at most --max-exports-per-cluster.
}

// activeCluster refuses writes from a cluster that is not registered or whose lease expired.
// The lease is judged by the rule the imports apply (lease.Judge, through the cache): a
// write is taken exactly when the cluster's exports take part in imports, so a cluster
// held while replication from the region of its last renewal lags may write, and one
// the imports dropped may not.
func (s *Server) activeCluster(ctx context.Context, key store.ClusterKey) error {
	c, err := s.store.GetCluster(ctx, key)
	if err != nil {
		return s.storeError("check cluster lease", err)
	}
	if !s.cache.Judge(c).Participates() {
		return status.Errorf(codes.FailedPrecondition, "cluster %s/%s: lease expired at %s; register again", key.Clusterset, key.ClusterID, c.ExpireTime().UTC().Format(time.RFC3339))
	}
	return nil
}
