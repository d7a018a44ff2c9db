package dynamodb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// syncWriters is how many of a sync's deletes are in flight at once.
const syncWriters = 16

// A sync writes its changed exports with inline endpoints in transactions of at most
// maxBatchExports export items and maxBatchBytes: DynamoDB allows 100 items (one is the
// cluster's check) and 4 MB per transaction.
const (
	maxBatchExports = 99
	maxBatchBytes   = 3 << 20
)

// syncWrite is one export of a sync to write: exports[i], encoded, over what the table held.
type syncWrite struct {
	i   int
	e   store.Export
	enc encoded
	old *held
}

// writeBatch writes a batch of a sync's exports in one transaction, with the same
// conditions as one export's write (the cluster exists, no newer delete of its exports,
// no newer write of each export), and sets their stored form. When a condition refuses
// the transaction, each export is written alone, so each refusal is told apart as
// putExport does.
func (st *Store) writeBatch(ctx context.Context, stored []store.Export, batch []syncWrite) error {
	if len(batch) == 1 {
		var err error
		stored[batch[0].i], err = st.putExport(ctx, batch[0].e, batch[0].enc, batch[0].old)
		return err
	}
	e0 := batch[0].e
	p := pk(e0.Clusterset)
	w := st.now().UnixMicro()
	items := make([]types.TransactWriteItem, 0, len(batch)+1)
	items = append(items, clusterCheck(&st.table, p, e0.ClusterID, w))
	for _, b := range batch {
		update, values := inlineUpdate(b.e, b.enc)
		items = append(items, exportUpdate(&st.table, p, b.e, update, values, w))
	}
	err := st.transact(ctx, items)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && !isTransactionConflict(err) {
		for _, b := range batch {
			var err error
			if stored[b.i], err = st.putExport(ctx, b.e, b.enc, b.old); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return unavailable("put exports", err)
	}
	for _, b := range batch {
		if b.old != nil && b.old.gen != "" {
			st.deleteChunks(ctx, b.e.Clusterset, b.e.Service, b.e.ClusterID, b.old.gen, b.old.chunks)
		}
		stored[b.i] = asStored(b.e, b.old)
	}
	return nil
}

// SyncExports implements store.Store. It reads the cluster's exports as they are stored
// (keys, sums and chunk generations, not the endpoints), writes only the exports whose
// content differs (in transactions of up to 99, one at a time), and deletes the cluster's
// other exports.
// The set is not one transaction (it may exceed DynamoDB's 100-item limit), so a failure
// part way leaves some written, and the caller retries the whole set.
func (st *Store) SyncExports(ctx context.Context, k store.ClusterKey, exports []store.Export) ([]store.Export, int, error) {
	if _, err := st.GetCluster(ctx, k); err != nil {
		return nil, 0, fmt.Errorf("sync exports of %s/%s: %w", k.Clusterset, k.ClusterID, err)
	}
	items, err := st.queryProjected(ctx, k.Clusterset, "EXPORT#", "SK, #sum, gen, chunks, createMs, updateMs", map[string]string{"#sum": "sum"})
	if err != nil {
		return nil, 0, err
	}
	type heldItem struct {
		held
		sum    []byte
		update time.Time
	}
	mine := map[store.ServiceKey]heldItem{}
	for _, it := range items {
		ek, err := exportKeyFrom(it)
		if err != nil {
			st.badItem(pk(k.Clusterset), getS(it, attrSK), err)
			continue
		}
		if ek.ClusterID == k.ClusterID {
			mine[ek.Service] = heldItem{held: *heldFrom(it), sum: getB(it, "sum"), update: fromMs(getN(it, "updateMs"))}
		}
	}
	stored := make([]store.Export, len(exports))
	keep := make(map[store.ServiceKey]bool, len(exports))
	var work []func(context.Context) error
	var inline []syncWrite
	for i, e := range exports {
		keep[e.Service] = true
		enc, err := encodeExport(e)
		if err != nil {
			return nil, 0, err
		}
		h, had := mine[e.Service]
		if had && bytes.Equal(h.sum, enc.sum) {
			// Unchanged: nothing to write; the result is what the table holds.
			e.CreateTime, e.UpdateTime = h.create, h.update
			stored[i] = e
			continue
		}
		var old *held
		if had {
			old = &h.held
		}
		if len(enc.eps) > inlineLimit {
			// Chunked endpoints: chunk items first, then the export item, alone.
			work = append(work, func(ctx context.Context) error {
				var err error
				stored[i], err = st.putExport(ctx, e, enc, old)
				return err
			})
			continue
		}
		inline = append(inline, syncWrite{i: i, e: e, enc: enc, old: old})
	}
	// Batches of even size (100 writes: two of 50, not 99 and 1), each within the limits.
	per := len(inline)
	if n := (len(inline) + maxBatchExports - 1) / maxBatchExports; n > 1 {
		per = (len(inline) + n - 1) / n
	}
	var batch []syncWrite
	batchBytes := 0
	flush := func() {
		if len(batch) > 0 {
			b := batch
			work = append(work, func(ctx context.Context) error { return st.writeBatch(ctx, stored, b) })
		}
		batch, batchBytes = nil, 0
	}
	for _, w := range inline {
		size := len(w.enc.spec) + len(w.enc.eps) + len(w.enc.sum) + 512
		if len(batch) == per || batchBytes+size > maxBatchBytes {
			flush()
		}
		batch = append(batch, w)
		batchBytes += size
	}
	flush()
	// One transaction at a time: each checks the cluster's item, and DynamoDB refuses
	// transactions on one item at once (TransactionConflict). Batches keep them few.
	for _, write := range work {
		if err := write(ctx); err != nil {
			return nil, 0, err
		}
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
