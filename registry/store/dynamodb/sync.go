package dynamodb

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// syncWriters is how many of a sync's writes are in flight at once.
const syncWriters = 16

// SyncExports implements store.Store. It reads the cluster's exports as they are stored
// (keys, sums and chunk generations, not the endpoints), writes only the exports whose
// content differs, up to syncWriters at a time, and deletes the cluster's other exports.
// The set is not one transaction (it may exceed DynamoDB's 100-item limit), so a failure
// part way leaves some written, and the caller retries the whole set.
func (st *Store) SyncExports(ctx context.Context, k store.ClusterKey, exports []store.Export) ([]store.Export, int, error) {
	if _, err := st.GetCluster(ctx, k); err != nil {
		return nil, 0, fmt.Errorf("sync exports of %s/%s: %w", k.Clusterset, k.ClusterID, err)
	}
	items, err := st.queryProjected(ctx, k.Clusterset, "EXPORT#", "SK, #sum, gen, chunks, createMs", map[string]string{"#sum": "sum"})
	if err != nil {
		return nil, 0, err
	}
	type heldItem struct {
		held
		sum []byte
	}
	mine := map[store.ServiceKey]heldItem{}
	for _, it := range items {
		ek, err := exportKeyFrom(it)
		if err != nil {
			st.badItem(pk(k.Clusterset), getS(it, attrSK), err)
			continue
		}
		if ek.ClusterID == k.ClusterID {
			mine[ek.Service] = heldItem{held: *heldFrom(it), sum: getB(it, "sum")}
		}
	}
	stored := make([]store.Export, len(exports))
	keep := make(map[store.ServiceKey]bool, len(exports))
	var work []func(context.Context) error
	for i, e := range exports {
		keep[e.Service] = true
		enc, err := encodeExport(e)
		if err != nil {
			return nil, 0, err
		}
		h, had := mine[e.Service]
		if had && bytes.Equal(h.sum, enc.sum) {
			// Unchanged: nothing to write.
			e.CreateTime = h.create
			stored[i] = e
			continue
		}
		var old *held
		if had {
			old = &h.held
		}
		work = append(work, func(ctx context.Context) error {
			var err error
			stored[i], err = st.putExport(ctx, e, enc, old)
			return err
		})
	}
	if err := inParallel(ctx, syncWriters, work); err != nil {
		return nil, 0, err
	}
	// One fence for all of the sync's deletes, raised after its writes.
	var fence int64
	for svc := range mine {
		if !keep[svc] {
			if fence, err = st.raiseFence(ctx, k); err != nil {
				return nil, 0, err
			}
			break
		}
	}
	var deleted atomic.Int64
	work = work[:0]
	for svc := range mine {
		if !keep[svc] {
			work = append(work, func(ctx context.Context) error {
				ok, err := st.deleteExportItem(ctx, k, svc, fence)
				if ok {
					deleted.Add(1)
				}
				return err
			})
		}
	}
	if err := inParallel(ctx, syncWriters, work); err != nil {
		return nil, int(deleted.Load()), err
	}
	return stored, int(deleted.Load()), nil
}

// inParallel runs the calls, at most n at a time, and returns the first error; after an
// error no more calls start.
func inParallel(parent context.Context, n int, calls []func(context.Context) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, call := range calls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := call(ctx); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return parent.Err()
}
