package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// StreamsAPI is the part of the DynamoDB Streams client the change feed uses.
type StreamsAPI interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Changes implements store.Store. Every write to the table — by this replica, another one,
// or a Global Table replication from another region — appears on the table's stream in this
// region; the feed reads every shard from its latest record and turns each record's key into
// a Change. Whenever reading fails or a shard is lost, it sends ChangeResync for everything.
func (st *Store) Changes(ctx context.Context) (<-chan store.Change, error) {
	out := st.feed.Subscribe(ctx)
	if st.streams == nil {
		return out, nil
	}
	desc, err := st.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &st.table})
	if err != nil {
		return nil, unavailable("describe table "+st.table, err)
	}
	arn := aws.ToString(desc.Table.LatestStreamArn)
	if arn == "" {
		return nil, fmt.Errorf("table %s has no stream: create it with mcs-admin create-table, or enable NEW_AND_OLD_IMAGES streams", st.table)
	}
	// The shards' positions are taken before returning, so no write made after Changes
	// returns is missed.
	iterators := map[string]*string{} // shard id -> next iterator
	done := map[string]bool{}         // closed shards fully read
	if err := st.discoverShards(ctx, arn, iterators, done, streamtypes.ShardIteratorTypeLatest); err != nil {
		return nil, unavailable("read the stream of "+st.table, err)
	}
	go st.follow(ctx, arn, iterators, done)
	return out, nil
}

// discoverShards adds an iterator for every shard not seen yet.
func (st *Store) discoverShards(ctx context.Context, arn string, iterators map[string]*string, done map[string]bool, typ streamtypes.ShardIteratorType) error {
	desc, err := st.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &arn})
	if err != nil {
		return err
	}
	for _, sh := range desc.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := iterators[id]; ok || done[id] {
			continue
		}
		it, err := st.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &arn, ShardId: &id, ShardIteratorType: typ})
		if err != nil {
			return err
		}
		iterators[id] = it.ShardIterator
	}
	return nil
}

// follow polls every shard of the stream until ctx ends.
func (st *Store) follow(ctx context.Context, arn string, iterators map[string]*string, done map[string]bool) {
	for ctx.Err() == nil {
		// Shards that appear later are children of shards already read: read them whole.
		if err := st.discoverShards(ctx, arn, iterators, done, streamtypes.ShardIteratorTypeTrimHorizon); err != nil {
			st.resync(ctx)
			continue
		}
		for round := 0; round < 20 && ctx.Err() == nil; round++ {
			for id, it := range iterators {
				if it == nil {
					delete(iterators, id)
					done[id] = true
					continue
				}
				recs, err := st.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
				if err != nil {
					var expired *streamtypes.ExpiredIteratorException
					var trimmed *streamtypes.TrimmedDataAccessException
					if errors.As(err, &expired) || errors.As(err, &trimmed) {
						delete(iterators, id)
						st.resync(ctx)
					}
					continue
				}
				for _, r := range recs.Records {
					st.record(ctx, r)
				}
				iterators[id] = recs.NextShardIterator
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(st.poll):
			}
		}
	}
}

// record publishes the change of one stream record. A record it cannot decode is
// reported and skipped: one bad item must not stop the feed of every replica.
func (st *Store) record(ctx context.Context, r streamtypes.Record) {
	if r.Dynamodb == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			st.badItem(keyString(r.Dynamodb.Keys, attrPK), keyString(r.Dynamodb.Keys, attrSK), fmt.Errorf("%w: decoding panicked: %v", errBadItem, p))
		}
	}()
	if isHeartbeat(r.Dynamodb.Keys) {
		st.observeHeartbeat(r)
		return
	}
	if c := st.chunkChange(ctx, r); c != nil {
		st.feed.Publish(*c)
		return
	}
	c, err := changeFrom(r.Dynamodb.Keys)
	if err != nil {
		st.badItem(keyString(r.Dynamodb.Keys, attrPK), keyString(r.Dynamodb.Keys, attrSK), err)
		return
	}
	if c == nil {
		return
	}
	if c.Kind == store.ChangeCluster {
		// The new image is the cluster: no read needed.
		if r.EventName == streamtypes.OperationTypeRemove {
			c.Deleted = true
		} else if img := r.Dynamodb.NewImage; len(img) > 0 {
			cl, err := clusterFromImage(c.Clusterset, img)
			if err != nil {
				st.badItem(keyString(r.Dynamodb.Keys, attrPK), keyString(r.Dynamodb.Keys, attrSK), err)
				return
			}
			c.Cluster = &cl
		}
	}
	if c.Kind == store.ChangeExport {
		// The export's time after the change (or its removal) is in the record: a replica
		// that applied this write already (its own) skips the echo without a read. The
		// content stays unread here (its chunks are other items); a replica that does not
		// hold the write reads it.
		switch {
		case r.EventName == streamtypes.OperationTypeRemove:
			c.Known = true
		case len(r.Dynamodb.NewImage) > 0:
			if upd, ok := r.Dynamodb.NewImage["updateMs"].(*streamtypes.AttributeValueMemberN); ok {
				if ms, err := strconv.ParseInt(upd.Value, 10, 64); err == nil {
					c.Known = true
					c.Exports = []store.Export{{Clusterset: c.Clusterset, ClusterID: c.ClusterID, Service: c.Service, UpdateTime: fromMs(ms)}}
				}
			}
		}
	}
	st.feed.Publish(*c)
}

// chunkChange is the change of an export whose current endpoint chunk was overwritten or
// removed — something this store never does to a chunk its export item names (it writes a
// new generation, then removes the old one) — so every replica reads the export again and
// applies the rule a full read applies (an export with a bad chunk is skipped). A chunk of
// a new generation, or the removal of an old one, changes nothing: nil.
func (st *Store) chunkChange(ctx context.Context, r streamtypes.Record) *store.Change {
	sk := keyString(r.Dynamodb.Keys, attrSK)
	if !strings.HasPrefix(sk, "EPS#") || r.EventName == streamtypes.OperationTypeInsert {
		return nil
	}
	clusterset, _ := strings.CutPrefix(keyString(r.Dynamodb.Keys, attrPK), "CS#")
	ck, err := parseChunkSK(sk)
	if err != nil {
		return nil
	}
	if r.EventName == streamtypes.OperationTypeRemove {
		item, err := st.getExportItem(ctx, clusterset, ck.Service, ck.ClusterID)
		if err != nil || item == nil || getS(item, "gen") != ck.gen {
			return nil
		}
	}
	return &store.Change{Kind: store.ChangeExport, Clusterset: clusterset, ClusterID: ck.ClusterID, Service: ck.Service}
}

func keyString(keys map[string]streamtypes.AttributeValue, k string) string {
	if v, ok := keys[k].(*streamtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (st *Store) resync(ctx context.Context) {
	st.feed.Publish(store.Resync(""))
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
}

// changeFrom maps a stream record's key to a Change: nil for an item that changes nothing
// by itself (an endpoint chunk: its export item changes too; a cluster's usage), an error for a key this store
// does not write.
func changeFrom(keys map[string]streamtypes.AttributeValue) (*store.Change, error) {
	pkv, ok1 := keys[attrPK].(*streamtypes.AttributeValueMemberS)
	skv, ok2 := keys[attrSK].(*streamtypes.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: the key has no string PK and SK", errBadItem)
	}
	clusterset, ok := strings.CutPrefix(pkv.Value, "CS#")
	var errs validate.Errors
	validate.DNSLabel(&errs, "clusterset", clusterset)
	if err := errs.Err(); !ok || err != nil {
		return nil, fmt.Errorf("item %q %q: %w: the partition key is not CS#<clusterset>", pkv.Value, skv.Value, errBadItem)
	}
	sk := skv.Value
	switch {
	case strings.HasPrefix(sk, "CLUSTER#"):
		id := strings.TrimPrefix(sk, "CLUSTER#")
		validate.DNSLabel(&errs, "cluster id", id)
		if err := errs.Err(); err != nil {
			return nil, fmt.Errorf("cluster item %q: %w: %v", sk, errBadItem, err)
		}
		return &store.Change{Kind: store.ChangeCluster, Clusterset: clusterset, ClusterID: id}, nil
	case strings.HasPrefix(sk, "EXPORT#"):
		ek, err := parseExportSK(sk)
		if err != nil {
			return nil, err
		}
		return &store.Change{Kind: store.ChangeExport, Clusterset: clusterset, ClusterID: ek.ClusterID, Service: ek.Service}, nil
	case strings.HasPrefix(sk, "EPS#"), strings.HasPrefix(sk, "USAGE#"):
		return nil, nil
	}
	return nil, fmt.Errorf("item %q %q: %w: unknown sort key", pkv.Value, sk, errBadItem)
}

// clusterFromImage decodes a cluster item from a stream image.
func clusterFromImage(clusterset string, img map[string]streamtypes.AttributeValue) (store.Cluster, error) {
	item := map[string]types.AttributeValue{}
	for k, v := range img {
		switch x := v.(type) {
		case *streamtypes.AttributeValueMemberS:
			item[k] = &types.AttributeValueMemberS{Value: x.Value}
		case *streamtypes.AttributeValueMemberN:
			item[k] = &types.AttributeValueMemberN{Value: x.Value}
		}
	}
	return clusterFrom(clusterset, item)
}
