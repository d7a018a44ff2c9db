// Package server implements the registry's gRPC service over a store and the imports cache.
// It validates requests, turns store errors into gRPC statuses, and tells the imports cache
// of its writes; what it keeps of its own is per process: the watches it serves and the
// drain signal that ends them.
package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/lease"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Server is the RegistryService.
type Server struct {
	registryv1.UnimplementedRegistryServiceServer
	store store.Store
	cache Cache
	now   func() time.Time
	log   *slog.Logger
	// draining ends every watch when the process shuts down, so a graceful stop completes.
	draining <-chan struct{}
	refused  func(limit string)
	writes   clusterLocks
	watches  *watchLimits
}

// Cache is what the server needs of the imports cache (imports.Cache is the one): the
// merged imports and the watches it serves, and the writes it must show at once. Declared
// here, where it is used, so the cache can change without the server, and the other way.
type Cache interface {
	Apply(ctx context.Context, ch store.Change) error
	Import(ctx context.Context, clusterset string, k store.ServiceKey) (*registryv1.ServiceImport, error)
	List(ctx context.Context, clusterset string, f imports.Filter) (imports.Snapshot, error)
	Watch(ctx context.Context, clusterset string, f imports.Filter, pageSize int, resumeEpoch string, resumeRevision int64) (*imports.Watcher, error)
	Judge(cl store.Cluster) lease.Verdict
	Replication() (region string, lag map[string]time.Duration)
}

var _ Cache = (*imports.Cache)(nil)

// Options configure a Server.
type Options struct {
	Store  store.Store
	Cache  Cache
	Logger *slog.Logger
	// Draining, when closed, ends open watches with UNAVAILABLE.
	Draining <-chan struct{}
	// Watch bounds the open watches and how long a send to one may block.
	Watch WatchLimits
	// Refused is told the name of a limit each time a request is refused for it; nil: nobody.
	Refused func(limit string)
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refused == nil {
		opts.Refused = func(string) {}
	}
	return &Server{store: opts.Store, cache: opts.Cache, now: time.Now, log: opts.Logger, draining: opts.Draining,
		refused: opts.Refused, watches: newWatchLimits(opts.Watch)}
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

// storeError maps a store error to a gRPC status; one a retry cannot fix (INTERNAL: a
// refused IAM permission, a missing table) is also logged, since the operator who can
// fix it reads the registry's log, not the client's.
func (s *Server) storeError(op string, err error) error {
	var qe *store.QuotaError
	if errors.As(err, &qe) {
		// The store's own check, of what it holds through every replica.
		return s.quotaRefusal(qe)
	}
	st := storeStatus(op, err)
	if status.Code(st) == codes.Internal {
		s.log.Error("the store refused a call; retrying will not help", "op", op, "error", err)
	}
	return st
}

// storeStatus is the gRPC status of a store error.
func storeStatus(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrClusterNotFound):
		return status.Errorf(codes.FailedPrecondition, "%s: %v; register the cluster first", op, err)
	case errors.Is(err, store.ErrSuperseded):
		return status.Errorf(codes.Aborted, "%s: %v", op, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", op, err)
	case errors.Is(err, store.ErrUnavailable):
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	default:
		// Not transient (a refused IAM permission, a request the store rejects): a retry
		// would fail the same way.
		return status.Errorf(codes.Internal, "%s: %v", op, err)
	}
}
