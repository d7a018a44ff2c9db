package dynamodb

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The requests one replica has in flight to DynamoDB are bounded (Options.MaxRequests).
// When the table falls behind — throttled, a slow region, a fleet that all reconnects at
// once — requests then wait in the replica, where one whose caller gave up leaves without
// costing the table anything, rather than in DynamoDB's queue, where the table would do
// work nobody waits for any more. And what keeps leases alive goes first: the requests of
// registrations (with a new cluster's usage and keys), renewals and the replication
// heartbeats (withUrgency) wait only for each other, so bulk work (syncs, export checks, refreshes) cannot make leases expire and
// clusters register and sync all over again.

// urgentKey marks a context whose requests go before the others (withUrgency).
type urgentKey struct{}

// withUrgency marks ctx's requests as keeping leases alive: registrations, renewals and
// the replication heartbeats.
func withUrgency(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func isUrgent(ctx context.Context) bool { return ctx.Value(urgentKey{}) != nil }

// gate hands out a bounded number of request slots, urgent waiters first, each kind in
// the order it came.
type gate struct {
	mu           sync.Mutex
	free         int
	urgent, bulk []chan struct{}
	// waiting is told of every change of the number of waiting requests; abandoned of a
	// wait its caller left.
	waiting   func(delta int)
	abandoned func()
}

func newGate(slots int, waiting func(int), abandoned func()) *gate {
	if waiting == nil {
		waiting = func(int) {}
	}
	if abandoned == nil {
		abandoned = func() {}
	}
	return &gate{free: slots, waiting: waiting, abandoned: abandoned}
}

// acquire takes a slot, waiting for one while ctx lasts. A caller that already left gets
// none: its request is never sent.
func (g *gate) acquire(ctx context.Context, urgent bool) error {
	if err := ctx.Err(); err != nil {
		g.abandoned()
		return err
	}
	g.mu.Lock()
	if g.free > 0 && (urgent || len(g.urgent) == 0) {
		g.free--
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if urgent {
		g.urgent = append(g.urgent, ch)
	} else {
		g.bulk = append(g.bulk, ch)
	}
	g.mu.Unlock()
	g.waiting(1)
	defer g.waiting(-1)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.abandoned()
	g.mu.Lock()
	queue := &g.bulk
	if urgent {
		queue = &g.urgent
	}
	if i := slices.Index(*queue, ch); i >= 0 {
		*queue = slices.Delete(*queue, i, i+1)
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	// The slot came as the caller left: pass it on.
	g.release()
	return ctx.Err()
}

// release returns a slot: to the first urgent waiter, else the first other one.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, queue := range []*[]chan struct{}{&g.urgent, &g.bulk} {
		if len(*queue) > 0 {
			close((*queue)[0])
			*queue = (*queue)[1:]
			return
		}
	}
	g.free++
}

// sent is the context of a request that left the gate: a caller that gives up now no
// longer cancels it. Cut off in flight, its work would be done by DynamoDB all the same
// and its outcome unknown here (a write the replica's cache then has to read back).
func sent(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
}

// gated is the table's API with every request through the gate.
type gated struct {
	API
	gate *gate
}

// through sends one request once the gate lets it: urgent when its context says so (withUrgency).
func through[I, O any](ctx context.Context, g *gate, in I, o []func(*dynamodb.Options), call func(context.Context, I, ...func(*dynamodb.Options)) (O, error)) (O, error) {
	if err := g.acquire(ctx, isUrgent(ctx)); err != nil {
		var none O
		return none, err
	}
	defer g.release()
	ctx, cancel := sent(ctx)
	defer cancel()
	return call(ctx, in, o...)
}

func (a gated) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return through(ctx, a.gate, in, o, a.API.GetItem)
}

func (a gated) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return through(ctx, a.gate, in, o, a.API.PutItem)
}

func (a gated) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return through(ctx, a.gate, in, o, a.API.UpdateItem)
}

func (a gated) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return through(ctx, a.gate, in, o, a.API.DeleteItem)
}

func (a gated) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return through(ctx, a.gate, in, o, a.API.Query)
}

func (a gated) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return through(ctx, a.gate, in, o, a.API.TransactWriteItems)
}
