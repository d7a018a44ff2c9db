// Package store defines what a registry store holds and the interface every store
// implements. A store holds only facts reported by clusters: clusters with their leases, and
// exports with their endpoints. ServiceImports are never stored; they are computed from
// these facts (see the merge package).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Errors every store returns, wrapped with context; test them with errors.Is.
var (
	// ErrClusterNotFound: the cluster is not registered.
	ErrClusterNotFound = errors.New("cluster not registered")
	// ErrUnavailable: the store cannot be reached.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSuperseded: a later write or delete of the same export applied first; this write
	// did not apply.
	ErrSuperseded = errors.New("superseded by a later write of the same cluster")
	// ErrQuotaExceeded: the write would take its cluster past its Quota; it did not apply.
	// The error is a *QuotaError.
	ErrQuotaExceeded = errors.New("over the cluster's quota")
)

// Usage is what a cluster holds in all its exports, or what one export weighs.
type Usage struct {
	Exports   int
	Endpoints int
	// Bytes is the exports' specs and endpoints as encoded in protobuf.
	Bytes int
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Exports: u.Exports + v.Exports, Endpoints: u.Endpoints + v.Endpoints, Bytes: u.Bytes + v.Bytes}
}

// Sub returns u minus v.
func (u Usage) Sub(v Usage) Usage {
	return Usage{Exports: u.Exports - v.Exports, Endpoints: u.Endpoints - v.Endpoints, Bytes: u.Bytes - v.Bytes}
}

// Weight is what one export counts against its cluster's quota.
func Weight(spec *registryv1.ExportSpec, groups []*registryv1.EndpointGroup) Usage {
	u := Usage{Exports: 1, Bytes: proto.Size(spec)}
	for _, g := range groups {
		u.Endpoints += len(g.GetEndpoints())
		u.Bytes += proto.Size(g)
	}
	return u
}

// Quota bounds what one cluster may hold; a zero field bounds nothing. A store enforces it
// in the write itself, so that replicas sharing the store never let a cluster past it
// together.
type Quota Usage

// Names of the quotas, as QuotaError.Limit says them.
const (
	QuotaExports   = "exports"
	QuotaEndpoints = "endpoints"
	QuotaBytes     = "bytes"
)

// Check returns a *QuotaError when a cluster holding u would be past a quota.
func (q Quota) Check(key ClusterKey, u Usage) error {
	for _, c := range []struct {
		name      string
		used, max int
	}{{QuotaExports, u.Exports, q.Exports}, {QuotaEndpoints, u.Endpoints, q.Endpoints}, {QuotaBytes, u.Bytes, q.Bytes}} {
		if c.max > 0 && c.used > c.max {
			return &QuotaError{Cluster: key, Limit: c.name, Used: c.used, Max: c.max}
		}
	}
	return nil
}

// QuotaError is a write refused for a quota: the cluster would hold Used of Limit, at most Max.
type QuotaError struct {
	Cluster   ClusterKey
	Limit     string
	Used, Max int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("cluster %s/%s would hold %d %s, at most %d: %v", e.Cluster.Clusterset, e.Cluster.ClusterID, e.Used, e.Limit, e.Max, ErrQuotaExceeded)
}

// Unwrap makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// ClusterKey names a cluster.
type ClusterKey struct {
	Clusterset string
	ClusterID  string
}

// ServiceKey names a Service within a clusterset.
type ServiceKey struct {
	Namespace string
	Name      string
}

// String returns namespace/name.
func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// Less orders service keys by namespace, then name.
func (k ServiceKey) Less(o ServiceKey) bool {
	if k.Namespace != o.Namespace {
		return k.Namespace < o.Namespace
	}
	return k.Name < o.Name
}

// Cluster is a registered member cluster and its lease.
type Cluster struct {
	Clusterset    string
	ClusterID     string
	Region        string
	LeaseDuration time.Duration
	// RegisterTime is when the cluster was first registered; kept across re-registrations.
	RegisterTime time.Time
	// RenewTime is the last registration or renewal.
	RenewTime time.Time
	// RenewRegion is the region of the store replica the last registration or renewal was
	// written to (the DynamoDB store's region); empty for a store of one region.
	RenewRegion string
	// ControllerVersion is the version of the controller that last registered the cluster.
	ControllerVersion string
}

// Key returns the cluster's key.
func (c Cluster) Key() ClusterKey {
	return ClusterKey{Clusterset: c.Clusterset, ClusterID: c.ClusterID}
}

// ExpireTime is when the lease expires unless renewed.
func (c Cluster) ExpireTime() time.Time { return c.RenewTime.Add(c.LeaseDuration) }

// Active reports whether the lease is valid at now. A lease is expired from its expiry time on.
func (c Cluster) Active(now time.Time) bool { return now.Before(c.ExpireTime()) }

// Export is one cluster's export of a Service. Spec and EndpointGroups are treated as
// immutable once handed to a store: writers build new messages instead of changing them.
type Export struct {
	Clusterset     string
	ClusterID      string
	Service        ServiceKey
	Spec           *registryv1.ExportSpec
	EndpointGroups []*registryv1.EndpointGroup
	// CreateTime is when the registry first saw the export. Written once.
	CreateTime time.Time
	// UpdateTime is when the export was last written.
	UpdateTime time.Time
}

// ClusterKey returns the key of the exporting cluster.
func (e Export) ClusterKey() ClusterKey {
	return ClusterKey{Clusterset: e.Clusterset, ClusterID: e.ClusterID}
}

// Unreadable is a stored item that no read can decode.
type Unreadable struct {
	Clusterset string
	// Key is the item's key within the clusterset, as stored.
	Key string
	// ClusterID and Service name the cluster or export the item belongs to, when its key
	// says (empty otherwise).
	ClusterID string
	Service   ServiceKey
	// Reason says what is wrong with it.
	Reason string
}

// Store is the registry's storage. Every method is safe for concurrent use; every
// read-modify-write is atomic in the store, also across registry replicas sharing it.
type Store interface {
	// RegisterCluster creates the cluster, or renews it and updates its region and lease
	// duration when it exists. RegisterTime of an existing cluster is kept.
	RegisterCluster(ctx context.Context, c Cluster) (Cluster, error)
	// RenewLease sets the cluster's RenewTime. ErrClusterNotFound when it is not
	// registered: a renewal never creates a cluster.
	RenewLease(ctx context.Context, key ClusterKey, now time.Time) (Cluster, error)
	// GetCluster returns one cluster or ErrClusterNotFound.
	GetCluster(ctx context.Context, key ClusterKey) (Cluster, error)
	// ListClusters returns the clusters of a clusterset, sorted by cluster id.
	ListClusters(ctx context.Context, clusterset string) ([]Cluster, error)
	// DeleteCluster removes the cluster and all its exports, and returns how many exports
	// were removed. ErrClusterNotFound when it is not registered.
	DeleteCluster(ctx context.Context, key ClusterKey) (int, error)

	// PutExport creates or replaces an export (a *QuotaError when the cluster would pass
	// the store's Quota); CreateTime of an existing export is kept,
	// and e.CreateTime is used only for a new one. ErrClusterNotFound when the exporting
	// cluster is not registered. A write whose ctx ended is either applied before the end
	// or never: it never applies after a later write or delete of the same export
	// (ErrSuperseded, or the context's error).
	PutExport(ctx context.Context, e Export) (Export, error)
	// DeleteExport removes an export and reports whether it existed.
	DeleteExport(ctx context.Context, key ClusterKey, svc ServiceKey) (bool, error)
	// SyncExports makes exports the complete set of the cluster's exports: it deletes the
	// cluster's other exports and writes each (as PutExport does; those that shrink before
	// those that grow, so a set within the Quota never passes it on the way). It returns the stored
	// exports in the order given and the Services whose export of the cluster it deleted.
	SyncExports(ctx context.Context, key ClusterKey, exports []Export) ([]Export, []ServiceKey, error)
	// ListExports returns the exports of a clusterset, sorted by service, then cluster id.
	ListExports(ctx context.Context, clusterset string) ([]Export, error)
	// ListClusterExports returns one cluster's exports, sorted by Service, and its export
	// items no read can decode: what ListExports and ListUnreadable hold of that cluster,
	// without reading (memory) or decoding (DynamoDB) the other clusters' exports. Every
	// controller asks for it periodically (--verify-exports-every), so its cost must not
	// grow with the clusterset. An unknown cluster has none.
	ListClusterExports(ctx context.Context, key ClusterKey) ([]Export, []Unreadable, error)
	// ListServiceExports returns every cluster's export of one Service, sorted by cluster id.
	ListServiceExports(ctx context.Context, clusterset string, svc ServiceKey) ([]Export, error)

	// ListUnreadable returns the clusterset's stored items that no read can decode (an
	// export whose endpoint chunks are missing or damaged, an item another writer put
	// there). Every read skips them, so each costs its own export or cluster and nothing
	// else; this lists them for an operator to remove (DeleteExport, DeleteCluster).
	ListUnreadable(ctx context.Context, clusterset string) ([]Unreadable, error)

	// Changes delivers every change of the store, made through this process or another
	// one sharing the store, until ctx ends. Changes may be delivered more than once.
	Changes(ctx context.Context) (<-chan Change, error)
	// Ping checks that the store can serve requests.
	Ping(ctx context.Context) error
}

// ByService groups exports by Service: the Services in the order their first export
// comes, and each Service's exports in their order.
func ByService(exports []Export) ([]ServiceKey, map[ServiceKey][]Export) {
	byService := map[ServiceKey][]Export{}
	var keys []ServiceKey
	for _, e := range exports {
		if _, ok := byService[e.Service]; !ok {
			keys = append(keys, e.Service)
		}
		byService[e.Service] = append(byService[e.Service], e)
	}
	return keys, byService
}
