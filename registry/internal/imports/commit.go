package imports

import (
	"context"
	"sync"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// groupCommit applies refreshes in batches: a refresh that arrives while another is being
// applied joins the next batch, and the next batch is applied once, with the union of the
// keys of every refresh in it (the Services to read) and their exports known without a
// read (a write's results). Each refresh is applied whole in one batch, so a cluster's sync
// still reaches watches in one step.
type groupCommit struct {
	mu      sync.Mutex
	running bool
	pending map[store.ServiceKey]struct{}
	order   []store.ServiceKey
	known   []store.Export
	waiters []chan error
}

// batchTimeout bounds one batch's store reads: a batch serves several callers, so it is not
// bound to the context of the one that happens to run it.
const batchTimeout = time.Minute

// do applies keys (to read) and known (exports as written) with apply, in a batch with
// whatever other refreshes are waiting, and returns that batch's error.
func (g *groupCommit) do(ctx context.Context, keys []store.ServiceKey, known []store.Export, apply func(context.Context, []store.ServiceKey, []store.Export) error) error {
	done := make(chan error, 1)
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[store.ServiceKey]struct{}{}
	}
	for _, k := range keys {
		if _, ok := g.pending[k]; !ok {
			g.pending[k] = struct{}{}
			g.order = append(g.order, k)
		}
	}
	g.known = append(g.known, known...)
	g.waiters = append(g.waiters, done)
	if g.running {
		g.mu.Unlock()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.running = true
	g.mu.Unlock()
	// This caller applies batches until none is waiting.
	for {
		g.mu.Lock()
		if len(g.waiters) == 0 {
			g.running = false
			g.mu.Unlock()
			break
		}
		batch, known, waiters := g.order, g.known, g.waiters
		g.pending, g.order, g.known, g.waiters = map[store.ServiceKey]struct{}{}, nil, nil, nil
		g.mu.Unlock()
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		err := apply(bctx, batch, known)
		cancel()
		for _, w := range waiters {
			w <- err
		}
	}
	return <-done
}
