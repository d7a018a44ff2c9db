package dynamodb

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Group commit of export writes. Each PutExport is one transaction of three or four items
// (the cluster's check, its usage, the export and, for a new export, its keys). Writes
// that arrive while commitFlights transactions are in flight wait and go together in the
// next, up to 100 items and maxBatchBytes: a replica's write rate is then bounded by
// DynamoDB's transactions a second times their size, not by one round trip per export.
// One item is in one transaction at a time (DynamoDB refuses a transaction that names an
// item twice, and conflicts between transactions on one item), so the writes of one
// cluster — each checks its cluster and changes its usage — go one at a time, in the order
// they came. A transaction that one write's condition refuses is told apart: that write
// gets the cancellation reasons of its own items, as if it had been sent alone; the others
// are sent again.

// commitFlights bounds the export transactions a replica has in flight at once for one
// clusterset (one partition: DynamoDB throttles it as a whole). One is the fastest on
// dynoxide, which serializes writes (about 370 writes a second with one, 200-390 with two,
// in BenchmarkRegistryLoad); each clusterset has its own, so one throttled clusterset
// does not hold up another's writes.
const commitFlights = 1

// commitTimeout bounds one group transaction, which no single caller's deadline governs.
const commitTimeout = 30 * time.Second

// commitWrite is one write waiting for its transaction.
type commitWrite struct {
	// ctx is its caller's: a write whose caller left before it was sent is not sent.
	ctx      context.Context
	items    []types.TransactWriteItem
	keys     []string
	size     int
	attempts int
	done     chan error
}

// committers are the committers of each clusterset (partition key) with writes waiting
// or in flight; an idle one is removed, so they are as many as the clustersets written
// to at once. Their one lock guards them all: what it covers is short.
type committers struct {
	mu  sync.Mutex
	all map[string]*committer
}

// committer holds a clusterset's writes waiting and the items of its transactions in
// flight. committers.mu guards it.
type committer struct {
	queue    []*commitWrite
	inFlight map[string]bool
	flights  int
}

// commit sends the items of one write in a transaction, with others' writes when they
// wait too; size is about the bytes it adds. It returns what the transaction returned for
// this write's items. A caller that leaves before the answer does not learn whether its
// write applied (as after any other error).
func (st *Store) commit(ctx context.Context, p string, items []types.TransactWriteItem, size int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &commitWrite{ctx: ctx, items: items, keys: itemKeys(items), size: size, done: make(chan error, 1)}
	cs := &st.commits
	cs.mu.Lock()
	if cs.all == nil {
		cs.all = map[string]*committer{}
	}
	c := cs.all[p]
	if c == nil {
		c = &committer{inFlight: map[string]bool{}}
		cs.all[p] = c
	}
	c.queue = append(c.queue, w)
	start := c.flights < commitFlights
	if start {
		c.flights++
	}
	cs.mu.Unlock()
	if start {
		go st.flush(context.WithoutCancel(ctx), p, c)
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// itemKeys names the items of a transaction.
func itemKeys(items []types.TransactWriteItem) []string {
	keys := make([]string, 0, len(items))
	for _, it := range items {
		var k map[string]types.AttributeValue
		switch {
		case it.ConditionCheck != nil:
			k = it.ConditionCheck.Key
		case it.Update != nil:
			k = it.Update.Key
		case it.Put != nil:
			k = it.Put.Item
		case it.Delete != nil:
			k = it.Delete.Key
		}
		keys = append(keys, getS(k, attrPK)+"\x00"+getS(k, attrSK))
	}
	return keys
}

// flush sends transactions of the waiting writes of clusterset p until none waits.
func (st *Store) flush(ctx context.Context, p string, c *committer) {
	cs := &st.commits
	for {
		cs.mu.Lock()
		batch := c.take()
		if len(batch) == 0 {
			c.flights--
			if c.flights == 0 && len(c.queue) == 0 {
				delete(cs.all, p)
			}
			cs.mu.Unlock()
			return
		}
		cs.mu.Unlock()
		again := st.send(ctx, batch)
		cs.mu.Lock()
		for _, w := range batch {
			for _, k := range w.keys {
				delete(c.inFlight, k)
			}
		}
		// Sent again first: they came before the writes waiting now.
		c.queue = append(again, c.queue...)
		cs.mu.Unlock()
	}
}

// take removes from the queue, in order, the writes of the next transaction: those whose
// items are in no transaction in flight nor in an earlier write taken, within DynamoDB's
// limits. committers.mu is held.
func (c *committer) take() []*commitWrite {
	var batch []*commitWrite
	items, size := 0, 0
	rest := c.queue[:0]
	for i, w := range c.queue {
		if err := w.ctx.Err(); err != nil {
			w.done <- err // its caller left: not sent
			continue
		}
		busy := false
		for _, k := range w.keys {
			busy = busy || c.inFlight[k]
		}
		if busy || items+len(w.items) > 100 || len(batch) > 0 && size+w.size > maxBatchBytes {
			rest = append(rest, w)
			if items >= 100-2 {
				rest = append(rest, c.queue[i+1:]...)
				break
			}
			continue
		}
		for _, k := range w.keys {
			c.inFlight[k] = true
		}
		batch = append(batch, w)
		items += len(w.items)
		size += w.size
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	return batch
}

// send sends one transaction of the batch's writes and answers each; it returns the
// writes to send again (refused only because another write of the transaction was).
func (st *Store) send(ctx context.Context, batch []*commitWrite) (again []*commitWrite) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	var items []types.TransactWriteItem
	for _, w := range batch {
		items = append(items, w.items...)
	}
	err := st.transact(ctx, items)
	var tce *types.TransactionCanceledException
	if len(batch) == 1 || !errors.As(err, &tce) || isTransactionConflict(err) || len(tce.CancellationReasons) != len(items) {
		for _, w := range batch {
			w.done <- err
		}
		return nil
	}
	off := 0
	for _, w := range batch {
		reasons := tce.CancellationReasons[off : off+len(w.items)]
		off += len(w.items)
		w.attempts++
		if refusedByOwn(reasons) || w.attempts == transactAttempts {
			w.done <- &types.TransactionCanceledException{Message: tce.Message, CancellationReasons: reasons}
			continue
		}
		again = append(again, w)
	}
	return again
}

// refusedByOwn: one of a write's own items refused the transaction (a failed condition,
// or anything but a conflict with another transaction).
func refusedByOwn(reasons []types.CancellationReason) bool {
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "", "None", "TransactionConflict":
		default:
			return true
		}
	}
	return false
}
