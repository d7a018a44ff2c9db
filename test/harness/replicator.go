package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Replicator copies every item change of one table among DynamoDB servers ("regions"),
// from each to every other, asynchronously after a delay, with last writer wins — what DynamoDB Global
// Tables do, which no local server emulates. A change is stamped with the time the
// replicator read it from its region's stream; a replicated change is applied only when it
// is newer than the last change of that item in the receiving region. A test can slow
// replication (SetDelay) or stall it (Pause, Resume), as a regional incident does.
type Replicator struct {
	mu    sync.Mutex
	delay time.Duration
	// paused holds the copies read while replication is stalled, in order.
	paused  bool
	pending []func()
	// last write time per region per item key ("PK|SK").
	last []map[string]time.Time
	// echo counts writes the replicator made into a region, which come back on that
	// region's stream and must not be copied again.
	echo  []map[string]int
	table string
	dbs   []*DynamoDB
}

// Replicate starts replicating table between a and b until the test ends.
func Replicate(tb testing.TB, a, b *DynamoDB, table string, delay time.Duration) *Replicator {
	tb.Helper()
	return ReplicateAll(tb, []*DynamoDB{a, b}, table, delay)
}

// ReplicateAll starts replicating table among every region of dbs until the test ends.
func ReplicateAll(tb testing.TB, dbs []*DynamoDB, table string, delay time.Duration) *Replicator {
	tb.Helper()
	r := &Replicator{delay: delay, table: table, dbs: dbs}
	for range dbs {
		r.last, r.echo = append(r.last, map[string]time.Time{}), append(r.echo, map[string]int{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	for i := range dbs {
		it, err := r.iterators(ctx, i)
		if err != nil {
			tb.Fatalf("harness: replicator: %v", err)
		}
		go r.follow(ctx, i, it)
	}
	return r
}

// SetDelay changes the delay of the copies read from now on.
func (r *Replicator) SetDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

// Pause stalls replication both ways: changes keep being read from each region's stream,
// and none is copied until Resume.
func (r *Replicator) Pause() {
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
}

// Resume copies what was read during the stall, in order and after the delay, and
// replicates as before.
func (r *Replicator) Resume() {
	r.mu.Lock()
	r.paused = false
	pending, delay := r.pending, r.delay
	r.pending = nil
	r.mu.Unlock()
	time.AfterFunc(delay, func() {
		for _, copyChange := range pending {
			copyChange()
		}
	})
}

func itemKey(keys map[string]streamtypes.AttributeValue) string {
	return fmt.Sprint(keys["PK"], "|", keys["SK"])
}

func (r *Replicator) iterators(ctx context.Context, region int) (map[string]*string, error) {
	d := r.dbs[region]
	desc, err := d.Client().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &r.table})
	if err != nil {
		return nil, err
	}
	arn := desc.Table.LatestStreamArn
	sc := dynamodbstreams.NewFromConfig(d.Config())
	sd, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		return nil, err
	}
	out := map[string]*string{}
	for _, sh := range sd.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeLatest})
		if err != nil {
			return nil, err
		}
		out[aws.ToString(sh.ShardId)] = it.ShardIterator
	}
	return out, nil
}

func (r *Replicator) follow(ctx context.Context, from int, iterators map[string]*string) {
	sc := dynamodbstreams.NewFromConfig(r.dbs[from].Config())
	for ctx.Err() == nil {
		for id, it := range iterators {
			if it == nil {
				continue
			}
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				continue
			}
			iterators[id] = out.NextShardIterator
			for _, rec := range out.Records {
				r.observe(ctx, from, rec)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// observe records a change seen on region from's stream and, unless it is the echo of a
// replicated write, schedules its copy to every other region.
func (r *Replicator) observe(ctx context.Context, from int, rec streamtypes.Record) {
	k := itemKey(rec.Dynamodb.Keys)
	now := time.Now()
	r.mu.Lock()
	if r.echo[from][k] > 0 {
		r.echo[from][k]--
		r.mu.Unlock()
		return
	}
	r.last[from][k] = now
	r.mu.Unlock()
	image := rec.Dynamodb.NewImage
	remove := rec.EventName == streamtypes.OperationTypeRemove
	copyTo := func(to int) func() {
		return func() {
			r.mu.Lock()
			if r.last[to][k].After(now) {
				// The receiving region wrote the item later: its write wins there (and its
				// own copy to this region wins here).
				r.mu.Unlock()
				return
			}
			r.last[to][k] = now
			r.echo[to][k]++
			r.mu.Unlock()
			c := r.dbs[to].Client()
			var err error
			if remove {
				_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &r.table, Key: convert(rec.Dynamodb.Keys)})
			} else {
				_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: convert(image)})
			}
			if err != nil {
				r.mu.Lock()
				r.echo[to][k]--
				r.mu.Unlock()
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for to := range r.dbs {
		if to == from {
			continue
		}
		copyChange := copyTo(to)
		if r.paused {
			r.pending = append(r.pending, copyChange)
			continue
		}
		time.AfterFunc(r.delay, copyChange)
	}
}

// convert turns a stream image into table attribute values.
func convert(in map[string]streamtypes.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(in))
	for k, v := range in {
		out[k] = convertValue(v)
	}
	return out
}

func convertValue(v streamtypes.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: x.Value}
	case *streamtypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: x.Value}
	case *streamtypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: x.Value}
	case *streamtypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}
	case *streamtypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: x.Value}
	case *streamtypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: x.Value}
	case *streamtypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: x.Value}
	case *streamtypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: x.Value}
	case *streamtypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = convertValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *streamtypes.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: convert(x.Value)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
