package dynamodb

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// A sync writes its changed exports with inline endpoints in transactions of at most
// maxBatchExports export items and maxBatchBytes: DynamoDB allows 100 items (one is the
// cluster's check, one its usage, one its keys) and 4 MB per transaction.
const (
	maxBatchExports = 97
	maxBatchBytes   = 3 << 20
)

// syncWrite is one export of a sync to write: exports[i], encoded, over what the table held.
type syncWrite struct {
	i   int
	e   store.Export
	enc encoded
	old *prior
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
	var d store.Usage
	var created []store.ServiceKey
	stale := false
	for _, b := range batch {
		d = d.Add(delta(b.enc.weight, b.old))
		stale = stale || b.old != nil && b.old.writeUs >= w
		if b.old == nil {
			created = append(created, b.e.Service)
		}
	}
	usage, ok := st.usageUpdate(p, e0.ClusterID, d)
	items := make([]types.TransactWriteItem, 0, len(batch)+3)
	items = append(items, clusterCheck(&st.table, p, e0.ClusterID, w), usage)
	for _, b := range batch {
		update, values := inlineUpdate(b.e, b.enc)
		items = append(items, exportUpdate(&st.table, p, b.e, update, values, w, b.old))
	}
	if len(created) > 0 {
		items = append(items, st.keysChange(p, e0.ClusterID, false, created...))
	}
	var err error
	if ok && !stale {
		err = st.transact(ctx, items)
	}
	var tce *types.TransactionCanceledException
	if !ok || stale || errors.As(err, &tce) && !isTransactionConflict(err) {
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
		st.priors.put(exportPriorKey(b.e), prior{create: stored[b.i].CreateTime, writeUs: w, weight: b.enc.weight})
	}
	return nil
}

// SyncExports implements store.Store. It reads the cluster's exports as they are stored
// (keys, sums and chunk generations, not the endpoints), writes only the exports whose
// content differs (in transactions of up to 99, one at a time), and deletes the cluster's
// other exports.
// The set is not one transaction (it may exceed DynamoDB's 100-item limit), so a failure
// part way leaves some written, and the caller retries the whole set.
func (st *Store) SyncExports(ctx context.Context, k store.ClusterKey, exports []store.Export) ([]store.Export, []store.ServiceKey, error) {
	// The synced set replaces everything the cluster holds, so its weight is the cluster's
	// usage after it: refused whole when it is past a quota, before any read or change.
	var after store.Usage
	for _, e := range exports {
		after = after.Add(store.Weight(e.Spec, e.EndpointGroups))
	}
	if err := st.quota.Check(k, after); err != nil {
		return nil, nil, fmt.Errorf("sync exports: %w", err)
	}
	// The cluster is not read first: every write below checks it in its own transaction,
	// and the server read it to judge its lease just before. Its exports are read through
	// its keys (clusterkeys.go): what the sync reads grows with its own exports only.
	items, err := st.clusterItems(ctx, k, "SK, #sum, gen, chunks, createMs, updateMs, writeUs, nE, nB", map[string]string{"#sum": "sum"})
	if err != nil {
		return nil, nil, err
	}
	type priorItem struct {
		prior
		sum    []byte
		update time.Time
	}
	mine := map[store.ServiceKey]priorItem{}
	for _, it := range items {
		// clusterItems returns the cluster's own items; a keys item may still name a
		// malformed key that an item was written at.
		ek, err := exportKeyFrom(it)
		if err != nil {
			st.badItem(pk(k.Clusterset), getS(it, attrSK), err)
			continue
		}
		mine[ek.Service] = priorItem{prior: *st.priorFrom(ctx, k.Clusterset, it), sum: getB(it, "sum"), update: fromMs(getN(it, "updateMs"))}
	}
	keep := make(map[store.ServiceKey]bool, len(exports))
	for _, e := range exports {
		keep[e.Service] = true
	}
	stored := make([]store.Export, len(exports))
	var chunked, inline []syncWrite
	for i, e := range exports {
		enc, err := encodeExport(e)
		if err != nil {
			return nil, nil, err
		}
		h, had := mine[e.Service]
		if had && bytes.Equal(h.sum, enc.sum) {
			// Unchanged: nothing to write; the result is what the table holds.
			e.CreateTime, e.UpdateTime = h.create, h.update
			stored[i] = e
			continue
		}
		var old *prior
		if had {
			old = &h.prior
		}
		w := syncWrite{i: i, e: e, enc: enc, old: old}
		if len(enc.eps) > inlineLimit {
			chunked = append(chunked, w) // chunk items first, then the export item, alone
			continue
		}
		inline = append(inline, w)
	}
	// The deletes first, under one fence raised before them (the writes after it are
	// newer), so the cluster's usage drops before the writes add to it: a set within the
	// quota never passes it on the way.
	var gone []syncDelete
	for svc, h := range mine {
		if !keep[svc] {
			gone = append(gone, syncDelete{svc: svc, old: h.prior})
		}
	}
	if len(mine) == 0 && len(inline)+len(chunked) == 0 {
		// Nothing stored and nothing to write: only the cluster's own item tells a
		// registered cluster that exports nothing from an unknown one. (A stored export
		// means the cluster held it: deleting a cluster deletes its exports.)
		if _, err := st.GetCluster(ctx, k); err != nil {
			return nil, nil, fmt.Errorf("sync exports of %s/%s: %w", k.Clusterset, k.ClusterID, err)
		}
	}
	var deleted []store.ServiceKey
	if len(gone) > 0 {
		fence, err := st.raiseFence(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		if deleted, err = st.deleteExports(ctx, k, gone, fence); err != nil {
			return nil, deleted, err
		}
	}
	// The writes that shrink the cluster's usage before those that grow it.
	growth := func(w syncWrite) int {
		d := delta(w.enc.weight, w.old)
		return d.Exports + d.Endpoints + d.Bytes
	}
	slices.SortStableFunc(inline, func(a, b syncWrite) int { return cmp.Compare(growth(a), growth(b)) })
	slices.SortStableFunc(chunked, func(a, b syncWrite) int { return cmp.Compare(growth(a), growth(b)) })
	var work []func(context.Context) error
	for _, w := range chunked {
		if growth(w) > 0 {
			break
		}
		work = append(work, st.putOne(stored, w))
	}
	// Batches of even size (98 writes: one batch; 100: two of 50), each within the limits.
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
	for _, w := range chunked {
		if growth(w) > 0 {
			work = append(work, st.putOne(stored, w))
		}
	}
	// One transaction at a time: each checks the cluster's item and changes its usage,
	// and DynamoDB refuses transactions on one item at once (TransactionConflict).
	for _, write := range work {
		if err := write(ctx); err != nil {
			return nil, deleted, err
		}
	}
	return stored, deleted, nil
}

// putOne is the write of one export of a sync, alone.
func (st *Store) putOne(stored []store.Export, w syncWrite) func(context.Context) error {
	return func(ctx context.Context) error {
		var err error
		stored[w.i], err = st.putExport(ctx, w.e, w.enc, w.old)
		return err
	}
}

// syncDelete is one export a sync deletes, as the table held it.
type syncDelete struct {
	svc store.ServiceKey
	old prior
}

// deleteExports deletes a sync's other exports unless a write newer than the fence f
// replaced them, and returns the Services it deleted, in transactions of up to maxBatchExports with the change of the
// cluster's usage; a transaction a condition refuses is done again one export at a time.
func (st *Store) deleteExports(ctx context.Context, k store.ClusterKey, gone []syncDelete, f int64) ([]store.ServiceKey, error) {
	p := pk(k.Clusterset)
	var deleted []store.ServiceKey
	for len(gone) > 0 {
		n := min(len(gone), maxBatchExports)
		batch := gone[:n]
		gone = gone[n:]
		var d store.Usage
		items := []types.TransactWriteItem{{}}
		svcs := make([]store.ServiceKey, 0, len(batch))
		stale := false
		for _, g := range batch {
			svcs = append(svcs, g.svc)
			d = d.Sub(g.old.weight)
			stale = stale || g.old.writeUs >= f
			old := g.old
			cond, values := priorCheck(&old)
			del := &types.Delete{TableName: &st.table, Key: key(p, exportSK(g.svc, k.ClusterID)), ConditionExpression: aws.String(cond)}
			if len(values) > 0 {
				del.ExpressionAttributeValues = values
			}
			items = append(items, types.TransactWriteItem{Delete: del})
		}
		items[0], _ = st.usageUpdate(p, k.ClusterID, d) // a decrease is never refused for a quota
		items = append(items, st.keysChange(p, k.ClusterID, true, svcs...))
		var err error
		if !stale {
			err = st.transact(ctx, items)
		}
		var tce *types.TransactionCanceledException
		if stale || errors.As(err, &tce) && !isTransactionConflict(err) {
			for _, g := range batch {
				ok, err := st.deleteExportItem(ctx, k, g.svc, f, true)
				if err != nil {
					return deleted, err
				}
				if ok {
					deleted = append(deleted, g.svc)
				}
			}
			continue
		}
		if err != nil {
			return deleted, unavailable("delete exports", err)
		}
		for _, g := range batch {
			st.priors.forget(priorKey{clusterset: k.Clusterset, clusterID: k.ClusterID, service: g.svc})
			if g.old.gen != "" {
				st.deleteChunks(ctx, k.Clusterset, g.svc, k.ClusterID, g.old.gen, g.old.chunks)
			}
		}
		for _, g := range batch {
			deleted = append(deleted, g.svc)
		}
	}
	return deleted, nil
}
