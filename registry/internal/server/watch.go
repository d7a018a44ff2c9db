package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/caller"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
)

// WatchLimits bound the watches one registry serves. Zero: no limit.
type WatchLimits struct {
	// MaxWatches is --max-watches: open watches in all.
	MaxWatches int
	// MaxWatchesPerClient is --max-watches-per-client: open watches of one client identity.
	MaxWatchesPerClient int
	// SendTimeout is --send-timeout: how long one message may wait to be sent before the
	// watch is closed.
	SendTimeout time.Duration
	// ClientOf names the caller of a watch for MaxWatchesPerClient (its certificate
	// identity); "" (or a nil func): the caller has no identity, and its peer's IP address
	// names it.
	ClientOf func(ctx context.Context) string
}

// Names of the watch limits, as the refusal metric labels them.
const (
	LimitWatches          = "watches"
	LimitWatchesPerClient = "watches_per_client"
	LimitSendTimeout      = "send_timeout"
)

type watchLimits struct {
	WatchLimits
	mu       sync.Mutex
	total    int
	byClient map[string]int
}

func newWatchLimits(l WatchLimits) *watchLimits {
	return &watchLimits{WatchLimits: l, byClient: map[string]int{}}
}

// clientOf names the caller for --max-watches-per-client (caller.Of).
func (w *watchLimits) clientOf(ctx context.Context) string { return caller.Of(ctx, w.ClientOf) }

// acquire counts a new watch, or names the limit it would exceed.
func (w *watchLimits) acquire(client string) (release func(), limit string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.MaxWatches > 0 && w.total >= w.MaxWatches {
		return nil, LimitWatches
	}
	if client != "" && w.MaxWatchesPerClient > 0 && w.byClient[client] >= w.MaxWatchesPerClient {
		return nil, LimitWatchesPerClient
	}
	w.total++
	if client != "" {
		w.byClient[client]++
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.total--
		if client != "" {
			if w.byClient[client]--; w.byClient[client] <= 0 {
				delete(w.byClient, client)
			}
		}
	}, ""
}

// WatchImports implements RegistryServiceServer. A watch may start before any cluster of
// the clusterset registered: it then starts with an empty snapshot.
func (s *Server) WatchImports(req *registryv1.WatchImportsRequest, stream registryv1.RegistryService_WatchImportsServer) error {
	if err := invalidWatch(req); err != nil {
		return err
	}
	client := s.watches.clientOf(stream.Context())
	release, limit := s.watches.acquire(client)
	switch limit {
	case LimitWatches:
		s.refused(limit)
		return status.Errorf(codes.ResourceExhausted, "watch refused: %d watches are open, at most %d (--max-watches); watch another replica or retry later", s.watches.MaxWatches, s.watches.MaxWatches)
	case LimitWatchesPerClient:
		s.refused(limit)
		return status.Errorf(codes.ResourceExhausted, "watch refused: %s has %d watches open, at most %d per client (--max-watches-per-client); close one", client, s.watches.MaxWatchesPerClient, s.watches.MaxWatchesPerClient)
	}
	defer release()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if s.draining != nil {
		go func() {
			select {
			case <-s.draining:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	f := imports.Filter{Namespace: req.GetNamespace(), IncludeEndpoints: req.GetIncludeEndpoints(), ClusterDeltas: req.GetClusterDeltas()}
	w, err := s.cache.Watch(ctx, req.GetClusterset(), f, int(req.GetSnapshotPageSize()), req.GetResumeEpoch(), req.GetResumeRevision())
	if err != nil {
		return s.storeError("watch imports", err)
	}
	defer w.Close()
	send := s.sender(stream)
	for {
		msg, err := w.Next(ctx)
		switch {
		case errors.Is(err, imports.ErrWatchEnded):
			return status.Error(codes.Unavailable, err.Error())
		case err != nil && stream.Context().Err() == nil:
			return status.Error(codes.Unavailable, "registry shutting down; watch again")
		case err != nil:
			return status.FromContextError(err).Err()
		}
		if err := send(msg); err != nil {
			return err
		}
	}
}

func invalidWatch(req *registryv1.WatchImportsRequest) error {
	var errs validate.Errors
	validate.DNSLabel(&errs, "clusterset", req.GetClusterset())
	if req.GetNamespace() != "" {
		validate.DNSLabel(&errs, "namespace", req.GetNamespace())
	}
	if n := req.GetSnapshotPageSize(); n < 0 || n > imports.MaxPageSize {
		errs.Add("snapshot_page_size", "%d is out of range: 0 (one message) to %d imports", n, imports.MaxPageSize)
	}
	return invalid(errs)
}

type timedSendsKey struct{}

// WithTimedSends marks the context of a watch stream whose Send gives up by itself after
// the send timeout, with RESOURCE_EXHAUSTED (the REST watch's write deadline): its sends
// are made in the handler's goroutine, never after it returned.
func WithTimedSends(ctx context.Context) context.Context {
	return context.WithValue(ctx, timedSendsKey{}, true)
}

// sender returns the watch's send: a message that waits longer than the send timeout
// (a client that stopped reading) ends the watch, which frees what the watch holds; the
// client watches again and resumes from its revision, or gets a snapshot.
//
// A message is sent as the shared *imports.Message: the codec (and the REST stream)
// encode it once for every watcher it goes to.
func (s *Server) sender(stream registryv1.RegistryService_WatchImportsServer) func(*imports.Message) error {
	timeout := s.watches.SendTimeout
	if timeout <= 0 {
		return func(msg *imports.Message) error { return stream.SendMsg(msg) }
	}
	if timed, _ := stream.Context().Value(timedSendsKey{}).(bool); timed {
		return func(msg *imports.Message) error {
			err := stream.SendMsg(msg)
			if status.Code(err) == codes.ResourceExhausted {
				s.refused(LimitSendTimeout)
				s.log.Warn("closed a watch whose client stopped reading", "timeout", timeout)
			}
			return err
		}
	}
	done := make(chan error, 1)
	timer := time.NewTimer(timeout)
	timer.Stop()
	return func(msg *imports.Message) error {
		go func() { done <- stream.SendMsg(msg) }()
		timer.Reset(timeout)
		select {
		case err := <-done:
			timer.Stop()
			return err
		case <-timer.C:
			// The blocked Send returns once the handler has returned and the stream ends.
			s.refused(LimitSendTimeout)
			s.log.Warn("closed a watch whose client stopped reading", "timeout", timeout)
			return status.Error(codes.ResourceExhausted, fmt.Sprintf("watch closed: a message waited more than %s to be sent (--send-timeout); the client reads too slowly; watch again", timeout))
		}
	}
}
