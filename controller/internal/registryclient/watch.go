package registryclient

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// ServiceKey names a Service.
type ServiceKey struct{ Namespace, Name string }

func keyOf(k *registryv1.ServiceKey) ServiceKey {
	return ServiceKey{Namespace: k.GetNamespace(), Name: k.GetName()}
}

// ImportWatch mirrors the clusterset's imports from the registry's WatchImports stream. It
// resumes from the last revision after a reconnect, follows the pool's current URL, and
// calls OnChange with the Services whose import changed.
type ImportWatch struct {
	Pool             *Pool
	Clusterset       string
	IncludeEndpoints bool
	Log              *slog.Logger
	// OnChange receives the Services whose import changed (all known ones after a snapshot).
	// Every function in it is called, in order.
	OnChange []func(keys []ServiceKey)

	mu      sync.Mutex
	imports map[ServiceKey]*registryv1.ServiceImport
	epoch   string
	rev     int64
	synced  bool
}

// Get returns a Service's import, or nil.
func (w *ImportWatch) Get(k ServiceKey) *registryv1.ServiceImport {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.imports[k]
}

// Keys returns the Services that have an import now.
func (w *ImportWatch) Keys() []ServiceKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]ServiceKey, 0, len(w.imports))
	for k := range w.imports {
		out = append(out, k)
	}
	return out
}

// Synced reports whether a snapshot has been received from the current registry.
func (w *ImportWatch) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// Run watches until ctx ends, reconnecting with backoff and jitter.
func (w *ImportWatch) Run(ctx context.Context) error {
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	backoff := time.Second
	for ctx.Err() == nil {
		received, err := w.once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if received {
			backoff = time.Second
		}
		w.Log.Info("import watch ended; watching again", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff/2 + time.Duration(rand.Int64N(int64(backoff)))):
		}
		if backoff *= 2; backoff > 30*time.Second {
			backoff = 30 * time.Second
		}
	}
	return nil
}

// once runs one stream; it ends when the stream breaks or the pool moves to another URL.
func (w *ImportWatch) once(ctx context.Context) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	req := &registryv1.WatchImportsRequest{Clusterset: w.Clusterset, IncludeEndpoints: w.IncludeEndpoints, ResumeEpoch: w.epoch, ResumeRevision: w.rev}
	w.mu.Unlock()
	var stream registryv1.RegistryService_WatchImportsClient
	url, err := w.Pool.Stream(sctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		stream, err = c.WatchImports(ctx, req)
		if err == nil {
			// The first message proves the server answers; without it a stream to a dead
			// URL would look open.
			var first *registryv1.WatchImportsResponse
			if first, err = stream.Recv(); err == nil {
				w.apply(first)
			}
		}
		return err
	})
	if err != nil {
		return false, err
	}
	// Follow failovers and failbacks: a stream stays on the URL it opened on.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if w.Pool.Current() != url {
					cancel()
					return
				}
			}
		}
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return true, err
		}
		w.apply(resp)
	}
}

func (w *ImportWatch) apply(resp *registryv1.WatchImportsResponse) {
	w.mu.Lock()
	var changed []ServiceKey
	if resp.GetSnapshot() || w.imports == nil {
		old := w.imports
		w.imports = make(map[ServiceKey]*registryv1.ServiceImport, len(resp.GetUpserts()))
		for k := range old {
			changed = append(changed, k)
		}
		w.synced = true
	}
	for _, imp := range resp.GetUpserts() {
		k := keyOf(imp.GetService())
		w.imports[k] = imp
		changed = append(changed, k)
	}
	for _, d := range resp.GetDeletes() {
		k := keyOf(d)
		delete(w.imports, k)
		changed = append(changed, k)
	}
	w.epoch, w.rev = resp.GetEpoch(), resp.GetRevision()
	w.mu.Unlock()
	if len(changed) > 0 {
		for _, f := range w.OnChange {
			f(changed)
		}
	}
}
