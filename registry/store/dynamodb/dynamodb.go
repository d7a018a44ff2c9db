// Package dynamodb is the registry store on one DynamoDB table, shared by any number of
// registry replicas, in one or more regions (one Global Table). docs/storage.md describes
// the table.
//
// Items (one partition per clusterset; PK "CS#<clusterset>"):
//
//	SK "CLUSTER#<cluster>"                    region, leaseMs, registerMs, renewMs, fenceUs
//	SK "EXPORT#<ns>/<name>#<cluster>"          spec, eps (inline endpoints) or gen+chunks, createMs, updateMs, writeUs
//	SK "EPS#<ns>/<name>#<cluster>#<gen>#<i>"   one chunk of a large endpoint set
//	SK "USAGE#<cluster>"                       uX, uE, uB: the cluster's exports, endpoints, bytes (usage.go)
//	SK "USAGE#<cluster>#KEYS"                  svcs, v: the Services the cluster exports (clusterkeys.go)
//
// and, in the partition "CS#mcs-replication", one replication heartbeat per replica
// (replication.go): SK "USAGE#HEARTBEAT#<region>#<replica>", region, seq, echo.
//
// Every read-modify-write is a conditional write: a renewal or an export needs the cluster
// item to exist, so nothing resurrects a deleted cluster; an export's createMs is written
// with if_not_exists, once.
//
// Writes of one cluster's exports are ordered by when the registry sent them
// (microseconds, the sending replica's clock): an export write carries writeUs and applies
// only over an older one; a delete applies only over an older write and raises the
// cluster's fenceUs, and an export write older than the fence does not apply. So a write
// the registry sent but DynamoDB received late (its client gave up, and deleted the export
// meanwhile) cannot bring the export back.
package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

const (
	attrPK = "PK"
	attrSK = "SK"
	// inlineLimit keeps an export item well below DynamoDB's 400 KB item limit; larger
	// endpoint sets are split into chunk items of at most chunkLimit bytes.
	inlineLimit = 300 * 1024
	chunkLimit  = 350 * 1024
)

// API is the part of the DynamoDB client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Store is the DynamoDB store.
type Store struct {
	api     API
	table   string
	streams StreamsAPI
	feed    store.Feed
	// poll is the change feed's polling interval per shard.
	poll    time.Duration
	badItem BadItemFunc
	dropped DroppedWriteFunc
	swept   func(chunks int)
	now     func() time.Time
	quota   store.Quota
	// region is recorded on every registration and renewal (Cluster.RenewRegion).
	region string
	// replication measures the other regions' lag from heartbeats; nil: none.
	replication *replication
	// priors are what this replica's writes left in the table: the next write of the same
	// export needs no read first.
	priors priors
	// commits groups concurrent export writes of a clusterset into transactions (commit.go).
	commits committers
}

// BadItemFunc is told of a stored item the store cannot decode; the store skips it.
type BadItemFunc func(pk, sk string, err error)

// DroppedWriteFunc is told of a write that failed where no caller waits for it, by what it
// was: "heartbeat" (a replication heartbeat; the next one follows), "heartbeat_cleanup"
// (removing a heartbeat item), "chunk_delete" (an endpoint chunk of a replaced export
// generation, left behind in the table until a reader sweeps it) or "chunk_sweep" (such a
// chunk a reader failed to remove; the next reader tries again) or "cluster_keys" (a
// cluster's export keys, written again after a read found them out of date; the next read
// queries again).
type DroppedWriteFunc func(op string, err error)

var _ store.Store = (*Store)(nil)

// Options configure New.
type Options struct {
	Client  API
	Streams StreamsAPI
	Table   string
	// Region is the region of the table replica this store writes to. Every registration
	// and renewal records it (store.Cluster.RenewRegion), so the other regions' replicas
	// can tell whose replication a lease waits for.
	Region string
	// StreamPoll is how often each stream shard is read; 0: 250ms.
	StreamPoll time.Duration
	// Capacity, when set, receives the capacity units every request consumed.
	Capacity CapacityFunc
	// BadItem, when set, is told of every item skipped because it cannot be decoded (an
	// item written by something else, or damaged): one bad item must not stop a replica.
	BadItem BadItemFunc
	// DroppedWrite, when set, is told of every write that failed where no caller waits
	// for it, so that no failure goes unseen.
	DroppedWrite DroppedWriteFunc
	// SweptChunks, when set, is told of the orphaned endpoint chunks a read found and
	// removed (see orphanAge).
	SweptChunks func(chunks int)
	// Quota bounds what each cluster may hold, across every replica sharing the table.
	Quota store.Quota
	// Replication, when set, turns on the replication heartbeats (RunHeartbeats,
	// ReplicationLag): for replicas in several regions over one Global Table.
	Replication *ReplicationOptions
	// MaxRequests bounds the requests to the table in flight at once (gate.go); 0: no bound.
	MaxRequests int
	// Waiting, when set, is told of every change of the number of requests waiting for
	// one of MaxRequests; Abandoned of each wait whose caller left (the request was not
	// sent).
	Waiting   func(delta int)
	Abandoned func()
}

// New returns a store on an existing table (see CreateTable).
func New(opts Options) *Store {
	if opts.StreamPoll == 0 {
		opts.StreamPoll = 250 * time.Millisecond
	}
	api := opts.Client
	if opts.MaxRequests > 0 {
		api = gated{API: api, gate: newGate(opts.MaxRequests, opts.Waiting, opts.Abandoned)}
	}
	if opts.Capacity != nil {
		api = metered{API: api, report: opts.Capacity}
	}
	bad := opts.BadItem
	if bad == nil {
		bad = func(string, string, error) {}
	}
	dropped := opts.DroppedWrite
	if dropped == nil {
		dropped = func(string, error) {}
	}
	swept := opts.SweptChunks
	if swept == nil {
		swept = func(int) {}
	}
	st := &Store{api: api, streams: opts.Streams, table: opts.Table, poll: opts.StreamPoll, badItem: bad, dropped: dropped, swept: swept,
		now: time.Now, quota: opts.Quota, region: opts.Region}
	if opts.Replication != nil {
		st.replication = newReplication(*opts.Replication)
	}
	return st
}

// Region is the region of the table replica this store writes to (Options.Region).
func (st *Store) Region() string { return st.region }

// Ping implements store.Store.
func (st *Store) Ping(ctx context.Context) error {
	out, err := st.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &st.table})
	if err != nil {
		return unavailable("describe table "+st.table, err)
	}
	if out.Table.TableStatus != types.TableStatusActive && out.Table.TableStatus != types.TableStatusUpdating {
		return fmt.Errorf("table %s is %s: %w", st.table, out.Table.TableStatus, store.ErrUnavailable)
	}
	return nil
}
