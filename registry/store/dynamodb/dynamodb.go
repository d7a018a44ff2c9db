// Package dynamodb is the registry store on one DynamoDB table, shared by any number of
// registry replicas, in one or more regions (one Global Table). docs/storage.md describes
// the table.
//
// Items (one partition per clusterset; PK "CS#<clusterset>"):
//
//	SK "CLUSTER#<cluster>"                    region, leaseMs, registerMs, renewMs, fenceUs
//	SK "EXPORT#<ns>/<name>#<cluster>"          spec, eps (inline endpoints) or gen+chunks, createMs, updateMs, writeUs
//	SK "EPS#<ns>/<name>#<cluster>#<gen>#<i>"   one chunk of a large endpoint set
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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/validate"
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
	now     func() time.Time
}

// BadItemFunc is told of a stored item the store cannot decode; the store skips it.
type BadItemFunc func(pk, sk string, err error)

var _ store.Store = (*Store)(nil)

// Options configure New.
type Options struct {
	Client  API
	Streams StreamsAPI
	Table   string
	// StreamPoll is how often each stream shard is read; 0: 250ms.
	StreamPoll time.Duration
	// Capacity, when set, receives the capacity units every request consumed.
	Capacity CapacityFunc
	// BadItem, when set, is told of every item skipped because it cannot be decoded (an
	// item written by something else, or damaged): one bad item must not stop a replica.
	BadItem BadItemFunc
	// Now is the clock of deletes' fences; nil: time.Now.
	Now func() time.Time
}

// New returns a store on an existing table (see CreateTable).
func New(opts Options) *Store {
	if opts.StreamPoll == 0 {
		opts.StreamPoll = 250 * time.Millisecond
	}
	api := opts.Client
	if opts.Capacity != nil {
		api = metered{API: api, report: opts.Capacity}
	}
	bad := opts.BadItem
	if bad == nil {
		bad = func(string, string, error) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{api: api, streams: opts.Streams, table: opts.Table, poll: opts.StreamPoll, badItem: bad, now: opts.Now}
}

func pk(clusterset string) string { return "CS#" + clusterset }
func clusterSK(id string) string  { return "CLUSTER#" + id }
func exportPrefix(svc store.ServiceKey) string {
	return "EXPORT#" + svc.Namespace + "/" + svc.Name + "#"
}
func exportSK(svc store.ServiceKey, id string) string { return exportPrefix(svc) + id }
func chunkPrefix(svc store.ServiceKey, id, gen string) string {
	return "EPS#" + svc.Namespace + "/" + svc.Name + "#" + id + "#" + gen + "#"
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func b(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

func key(p, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: s(p), attrSK: s(sk)}
}

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) int64 {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}

func getB(item map[string]types.AttributeValue, k string) []byte {
	if v, ok := item[k].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func ms(t time.Time) int64     { return t.UnixMilli() }
func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }
func isCondFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
}

// errBadItem marks an item whose shape is not one this store writes.
var errBadItem = errors.New("malformed item")

func clusterFrom(clusterset string, item map[string]types.AttributeValue) (store.Cluster, error) {
	sk := getS(item, attrSK)
	id, ok := strings.CutPrefix(sk, "CLUSTER#")
	var errs validate.Errors
	validate.DNSLabel(&errs, "cluster id", id)
	lease := getN(item, "leaseMs")
	if lease <= 0 {
		errs.Add("leaseMs", "%d, must be positive", lease)
	}
	if err := errs.Err(); !ok || err != nil {
		return store.Cluster{}, fmt.Errorf("cluster item %q: %w: %v", sk, errBadItem, err)
	}
	return store.Cluster{
		Clusterset: clusterset, ClusterID: id, Region: getS(item, "region"),
		LeaseDuration: time.Duration(lease) * time.Millisecond,
		RegisterTime:  fromMs(getN(item, "registerMs")), RenewTime: fromMs(getN(item, "renewMs")),
	}, nil
}

// RegisterCluster implements store.Store.
func (st *Store) RegisterCluster(ctx context.Context, c store.Cluster) (store.Cluster, error) {
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table,
		Key:       key(pk(c.Clusterset), clusterSK(c.ClusterID)),
		// A new cluster's fence is its registration: no export write from before it (of a
		// deleted cluster of the same name) applies.
		UpdateExpression:          aws.String("SET #r = :r, leaseMs = :l, renewMs = :now, registerMs = if_not_exists(registerMs, :now), fenceUs = if_not_exists(fenceUs, :us)"),
		ExpressionAttributeNames:  map[string]string{"#r": "region"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": s(c.Region), ":l": n(c.LeaseDuration.Milliseconds()), ":now": n(ms(c.RenewTime)), ":us": n(st.now().UnixMicro())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return store.Cluster{}, unavailable("register cluster", err)
	}
	return clusterFrom(c.Clusterset, out.Attributes)
}

// RenewLease implements store.Store. The condition makes sure a renewal never creates a
// cluster that was deleted, in this region or (after replication) in another.
func (st *Store) RenewLease(ctx context.Context, k store.ClusterKey, now time.Time) (store.Cluster, error) {
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &st.table,
		Key:                       key(pk(k.Clusterset), clusterSK(k.ClusterID)),
		UpdateExpression:          aws.String("SET renewMs = :now"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(ms(now))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		return store.Cluster{}, fmt.Errorf("renew %s/%s: %w", k.Clusterset, k.ClusterID, store.ErrClusterNotFound)
	}
	if err != nil {
		return store.Cluster{}, unavailable("renew lease", err)
	}
	return clusterFrom(k.Clusterset, out.Attributes)
}

// GetCluster implements store.Store.
func (st *Store) GetCluster(ctx context.Context, k store.ClusterKey) (store.Cluster, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key(pk(k.Clusterset), clusterSK(k.ClusterID)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return store.Cluster{}, unavailable("get cluster", err)
	}
	if len(out.Item) == 0 {
		return store.Cluster{}, fmt.Errorf("get %s/%s: %w", k.Clusterset, k.ClusterID, store.ErrClusterNotFound)
	}
	return clusterFrom(k.Clusterset, out.Item)
}

// query returns every item of the clusterset whose sort key starts with prefix.
func (st *Store) query(ctx context.Context, clusterset, prefix string) ([]map[string]types.AttributeValue, error) {
	return st.queryProjected(ctx, clusterset, prefix, "", nil)
}

// queryProjected is query reading only the attributes of projection (and the keys); an
// empty projection reads whole items.
func (st *Store) queryProjected(ctx context.Context, clusterset, prefix, projection string, names map[string]string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	var proj *string
	if projection != "" {
		proj = aws.String(projection)
	}
	for {
		out, err := st.api.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &st.table,
			KeyConditionExpression:    aws.String("PK = :pk AND begins_with(SK, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk(clusterset)), ":p": s(prefix)},
			ProjectionExpression:      proj,
			ExpressionAttributeNames:  names,
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, unavailable("query", err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		start = out.LastEvaluatedKey
	}
}

// ListClusters implements store.Store.
func (st *Store) ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error) {
	items, err := st.query(ctx, clusterset, "CLUSTER#")
	if err != nil {
		return nil, err
	}
	out := make([]store.Cluster, 0, len(items))
	for _, it := range items {
		c, err := clusterFrom(clusterset, it)
		if err != nil {
			st.badItem(pk(clusterset), getS(it, attrSK), err)
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClusterID < out[j].ClusterID })
	return out, nil
}

// DeleteCluster implements store.Store. The cluster item goes first, so no export can be
// written for it afterwards; then its exports and their chunks.
func (st *Store) DeleteCluster(ctx context.Context, k store.ClusterKey) (int, error) {
	_, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &st.table, Key: key(pk(k.Clusterset), clusterSK(k.ClusterID)),
		ConditionExpression: aws.String("attribute_exists(PK)"),
	})
	if isCondFailed(err) {
		return 0, fmt.Errorf("delete %s/%s: %w", k.Clusterset, k.ClusterID, store.ErrClusterNotFound)
	}
	if err != nil {
		return 0, unavailable("delete cluster", err)
	}
	items, err := st.query(ctx, k.Clusterset, "EXPORT#")
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, it := range items {
		e, err := exportKeyFrom(it)
		if err != nil {
			st.badItem(pk(k.Clusterset), getS(it, attrSK), err)
			continue
		}
		if e.ClusterID != k.ClusterID {
			continue
		}
		if _, err := st.DeleteExport(ctx, k, e.Service); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

type exportKey struct {
	Service   store.ServiceKey
	ClusterID string
}

func exportKeyFrom(item map[string]types.AttributeValue) (exportKey, error) {
	return parseExportSK(getS(item, attrSK))
}

// parseExportSK reads EXPORT#<namespace>/<name>#<cluster id>, each part checked as the
// registry checks requests.
func parseExportSK(sk string) (exportKey, error) {
	rest, ok := strings.CutPrefix(sk, "EXPORT#")
	i := strings.LastIndexByte(rest, '#')
	if !ok || i < 0 {
		return exportKey{}, fmt.Errorf("export item %q: %w: the sort key is not EXPORT#<namespace>/<name>#<cluster>", sk, errBadItem)
	}
	svc, id := rest[:i], rest[i+1:]
	ns, name, ok := strings.Cut(svc, "/")
	var errs validate.Errors
	validate.DNSLabel(&errs, "namespace", ns)
	validate.ServiceName(&errs, "name", name)
	validate.DNSLabel(&errs, "cluster id", id)
	if err := errs.Err(); !ok || err != nil {
		return exportKey{}, fmt.Errorf("export item %q: %w: %v", sk, errBadItem, err)
	}
	return exportKey{Service: store.ServiceKey{Namespace: ns, Name: name}, ClusterID: id}, nil
}

// chunkIndex is the index at the end of a chunk item's sort key.
func chunkIndex(item map[string]types.AttributeValue) (int, error) {
	sk := getS(item, attrSK)
	n, err := strconv.Atoi(sk[strings.LastIndexByte(sk, '#')+1:])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("chunk item %q: %w: no chunk index", sk, errBadItem)
	}
	return n, nil
}

// groups wraps endpoint groups for storage; an Export message carries them.
func marshalGroups(groups []*registryv1.EndpointGroup) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(&registryv1.Export{EndpointGroups: groups})
}

func unmarshalGroups(data []byte) ([]*registryv1.EndpointGroup, error) {
	e := &registryv1.Export{}
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, err
	}
	return e.GetEndpointGroups(), nil
}

// chunks splits endpoint groups into pieces of at most chunkLimit bytes each; an endpoint
// group that is too large is split by endpoints.
func chunks(groups []*registryv1.EndpointGroup) ([][]byte, error) {
	var out [][]byte
	var cur []*registryv1.EndpointGroup
	size := 0
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		data, err := marshalGroups(cur)
		if err != nil {
			return err
		}
		out = append(out, data)
		cur, size = nil, 0
		return nil
	}
	for _, g := range groups {
		head := &registryv1.EndpointGroup{AddressType: g.GetAddressType(), Ports: g.GetPorts()}
		part := proto.Clone(head).(*registryv1.EndpointGroup)
		partSize := proto.Size(head)
		for _, e := range g.GetEndpoints() {
			es := proto.Size(e) + 8
			if size+partSize+es > chunkLimit && (len(part.Endpoints) > 0 || len(cur) > 0) {
				if len(part.Endpoints) > 0 {
					cur = append(cur, part)
				}
				if err := flush(); err != nil {
					return nil, err
				}
				part = proto.Clone(head).(*registryv1.EndpointGroup)
				partSize = proto.Size(head)
			}
			part.Endpoints = append(part.Endpoints, e)
			partSize += es
		}
		cur = append(cur, part)
		size += partSize
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func newGen() string {
	var x [6]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// putExport writes one export: chunk items first (when the endpoints do not fit inline),
// then the export item in a transaction with a check that the cluster exists, then the
// previous chunks are removed.
// encoded is an export's spec and endpoints as stored, and their sum.
type encoded struct {
	spec, eps []byte
	sum       []byte
}

func encodeExport(e store.Export) (encoded, error) {
	spec, err := proto.MarshalOptions{Deterministic: true}.Marshal(e.Spec)
	if err != nil {
		return encoded{}, fmt.Errorf("encode export spec: %w", err)
	}
	eps, err := marshalGroups(e.EndpointGroups)
	if err != nil {
		return encoded{}, fmt.Errorf("encode endpoints: %w", err)
	}
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint64(len(spec)))
	h.Write(spec)
	h.Write(eps)
	return encoded{spec: spec, eps: eps, sum: h.Sum(nil)}, nil
}

// held is what the table holds of an export before a write: its chunks (to remove after
// the write) and its create time.
type held struct {
	gen    string
	chunks int
	create time.Time
}

func heldFrom(item map[string]types.AttributeValue) *held {
	if item == nil {
		return nil
	}
	return &held{gen: getS(item, "gen"), chunks: int(getN(item, "chunks")), create: fromMs(getN(item, "createMs"))}
}

// putExport writes one export: chunk items first (when the endpoints do not fit inline),
// then the export item in a transaction with a check that the cluster exists, then the
// previous chunks are removed. old is what the table held (nil: nothing).
func (st *Store) putExport(ctx context.Context, e store.Export, enc encoded, old *held) (store.Export, error) {
	spec, eps := enc.spec, enc.eps
	var err error
	p := pk(e.Clusterset)
	values := map[string]types.AttributeValue{
		":spec": b(spec), ":now": n(ms(e.CreateTime)), ":upd": n(ms(e.UpdateTime)), ":sum": b(enc.sum),
	}
	update := "SET spec = :spec, createMs = if_not_exists(createMs, :now), updateMs = :upd, writeUs = :w, #sum = :sum"
	gen := ""
	var parts [][]byte
	if len(eps) <= inlineLimit {
		values[":eps"] = b(eps)
		update += ", eps = :eps REMOVE gen, chunks"
	} else {
		if parts, err = chunks(e.EndpointGroups); err != nil {
			return store.Export{}, fmt.Errorf("split endpoints: %w", err)
		}
		gen = newGen()
		for i, part := range parts {
			if _, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &st.table, Item: map[string]types.AttributeValue{
				attrPK: s(p), attrSK: s(chunkPrefix(e.Service, e.ClusterID, gen) + strconv.Itoa(i)), "data": b(part),
			}}); err != nil {
				return store.Export{}, unavailable("write endpoint chunk", err)
			}
		}
		values[":gen"], values[":chunks"] = s(gen), n(int64(len(parts)))
		update += ", gen = :gen, chunks = :chunks REMOVE eps"
	}
	for attempt := 1; ; attempt++ {
		err = st.writeExport(ctx, p, e, update, values)
		if errors.Is(err, errFenced) && attempt < 3 && ctx.Err() == nil {
			// A delete of this cluster's exports was sent after this write, but the write's
			// client still waits: the write is still wanted. Send it again, as of now.
			continue
		}
		break
	}
	if err != nil {
		if errors.Is(err, errFenced) || errors.Is(err, store.ErrSuperseded) || errors.Is(err, store.ErrClusterNotFound) {
			// The write surely did not apply: its chunks are nobody's. (After any other
			// error it may have applied, and its chunks are kept.)
			st.deleteChunks(context.WithoutCancel(ctx), e.Clusterset, e.Service, e.ClusterID, gen, len(parts))
		}
		if errors.Is(err, errFenced) {
			return store.Export{}, fmt.Errorf("put export %s from %s/%s: a delete of the cluster's exports came after it: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrSuperseded)
		}
		return store.Export{}, err
	}
	if old != nil && old.gen != "" {
		st.deleteChunks(ctx, e.Clusterset, e.Service, e.ClusterID, old.gen, old.chunks)
	}
	// The create time is written once: the held one, or this write's. Times are returned
	// as stored (milliseconds), so the write's result and later reads of it are equal.
	e.CreateTime, e.UpdateTime = fromMs(ms(e.CreateTime)), fromMs(ms(e.UpdateTime))
	if old != nil {
		e.CreateTime = old.create
	}
	return e, nil
}

// errFenced: a delete of the cluster's exports is newer than the write.
var errFenced = errors.New("fenced by a later delete")

// writeExport is the export item's write: it applies only when the cluster exists, no
// delete of its exports is newer (fenceUs) and no newer write of the export applied.
func (st *Store) writeExport(ctx context.Context, p string, e store.Export, update string, values map[string]types.AttributeValue) error {
	w := st.now().UnixMicro()
	values[":w"] = n(w)
	_, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: &st.table, Key: key(p, clusterSK(e.ClusterID)),
			ConditionExpression:                 aws.String("attribute_exists(PK) AND (attribute_not_exists(fenceUs) OR fenceUs < :w)"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":w": n(w)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{Update: &types.Update{TableName: &st.table, Key: key(p, exportSK(e.Service, e.ClusterID)),
			UpdateExpression: aws.String(update), ConditionExpression: aws.String("attribute_not_exists(writeUs) OR writeUs < :w"),
			ExpressionAttributeNames: map[string]string{"#sum": "sum"}, ExpressionAttributeValues: values}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) == 2 {
		cluster, export := tce.CancellationReasons[0], tce.CancellationReasons[1]
		switch {
		case aws.ToString(cluster.Code) == "ConditionalCheckFailed" && len(cluster.Item) == 0:
			return fmt.Errorf("put export %s from %s/%s: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrClusterNotFound)
		case aws.ToString(cluster.Code) == "ConditionalCheckFailed":
			return errFenced
		case aws.ToString(export.Code) == "ConditionalCheckFailed":
			return fmt.Errorf("put export %s from %s/%s: a newer write of it applied: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrSuperseded)
		}
	}
	if isCondFailed(err) {
		return fmt.Errorf("put export %s from %s/%s: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrClusterNotFound)
	}
	if err != nil {
		return unavailable("put export", err)
	}
	return nil
}

func (st *Store) deleteChunks(ctx context.Context, clusterset string, svc store.ServiceKey, id, gen string, count int) {
	for i := range count {
		_, _ = st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(pk(clusterset), chunkPrefix(svc, id, gen)+strconv.Itoa(i))})
	}
}

func (st *Store) getExportItem(ctx context.Context, clusterset string, svc store.ServiceKey, id string) (map[string]types.AttributeValue, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key(pk(clusterset), exportSK(svc, id)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, unavailable("get export", err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// PutExport implements store.Store.
func (st *Store) PutExport(ctx context.Context, e store.Export) (store.Export, error) {
	enc, err := encodeExport(e)
	if err != nil {
		return store.Export{}, err
	}
	// What is held now: its chunks go after the write, and its create time is the
	// export's (written once). A first write racing another replica's first write of the
	// same export may answer its own create time; the table keeps the first.
	item, err := st.getExportItem(ctx, e.Clusterset, e.Service, e.ClusterID)
	if err != nil {
		return store.Export{}, err
	}
	return st.putExport(ctx, e, enc, heldFrom(item))
}

// DeleteExport implements store.Store. It first raises the cluster's fence, so that an
// export write received before the delete and still on its way to DynamoDB cannot apply
// after it; then it deletes the export unless a newer write replaced it.
func (st *Store) DeleteExport(ctx context.Context, k store.ClusterKey, svc store.ServiceKey) (bool, error) {
	f, err := st.raiseFence(ctx, k)
	if err != nil {
		return false, err
	}
	return st.deleteExportItem(ctx, k, svc, f)
}

// raiseFence sets the cluster's fenceUs to now and returns it: no export write of the
// cluster sent before it applies after.
func (st *Store) raiseFence(ctx context.Context, k store.ClusterKey) (int64, error) {
	f := st.now().UnixMicro()
	_, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table, Key: key(pk(k.Clusterset), clusterSK(k.ClusterID)),
		UpdateExpression:          aws.String("SET fenceUs = :f"),
		ConditionExpression:       aws.String("attribute_exists(PK) AND (attribute_not_exists(fenceUs) OR fenceUs < :f)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": n(f)},
	})
	if err != nil && !isCondFailed(err) {
		// A failed condition: the cluster is gone (its exports with it) or a newer fence stands.
		return 0, unavailable("fence export writes", err)
	}
	return f, nil
}

// deleteExportItem deletes the export, with its chunks, unless a write newer than the
// fence f replaced it.
func (st *Store) deleteExportItem(ctx context.Context, k store.ClusterKey, svc store.ServiceKey, f int64) (bool, error) {
	out, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &st.table, Key: key(pk(k.Clusterset), exportSK(svc, k.ClusterID)), ReturnValues: types.ReturnValueAllOld,
		ConditionExpression:       aws.String("attribute_not_exists(writeUs) OR writeUs < :f"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": n(f)},
	})
	if isCondFailed(err) {
		return false, nil // a newer write of the export stands
	}
	if err != nil {
		return false, unavailable("delete export", err)
	}
	if gen := getS(out.Attributes, "gen"); gen != "" {
		st.deleteChunks(ctx, k.Clusterset, svc, k.ClusterID, gen, int(getN(out.Attributes, "chunks")))
	}
	return len(out.Attributes) > 0, nil
}

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

// exportFrom decodes an export item, reading its chunks when it has them.
func (st *Store) exportFrom(ctx context.Context, clusterset string, item map[string]types.AttributeValue) (store.Export, error) {
	ek, err := exportKeyFrom(item)
	if err != nil {
		return store.Export{}, err
	}
	e := store.Export{
		Clusterset: clusterset, ClusterID: ek.ClusterID, Service: ek.Service,
		CreateTime: fromMs(getN(item, "createMs")), UpdateTime: fromMs(getN(item, "updateMs")), Spec: &registryv1.ExportSpec{},
	}
	if err := proto.Unmarshal(getB(item, "spec"), e.Spec); err != nil {
		return e, fmt.Errorf("decode export spec of %s from %s: %w: %w", ek.Service, ek.ClusterID, errBadItem, err)
	}
	if gen := getS(item, "gen"); gen != "" {
		want := int(getN(item, "chunks"))
		parts, err := st.query(ctx, clusterset, chunkPrefix(ek.Service, ek.ClusterID, gen))
		if err != nil {
			return e, err
		}
		if len(parts) != want {
			return e, fmt.Errorf("export %s from %s: %d of %d endpoint chunks: %w", ek.Service, ek.ClusterID, len(parts), want, errConcurrentWrite)
		}
		type chunk struct {
			n    int
			data []byte
		}
		ordered := make([]chunk, len(parts))
		for i, p := range parts {
			n, err := chunkIndex(p)
			if err != nil {
				return e, err
			}
			ordered[i] = chunk{n, getB(p, "data")}
		}
		sort.Slice(ordered, func(a, b int) bool { return ordered[a].n < ordered[b].n })
		for _, c := range ordered {
			groups, err := unmarshalGroups(c.data)
			if err != nil {
				return e, fmt.Errorf("decode endpoint chunk %d of %s from %s: %w: %w", c.n, ek.Service, ek.ClusterID, errBadItem, err)
			}
			e.EndpointGroups = appendMerged(e.EndpointGroups, groups)
		}
		return e, nil
	}
	groups, err := unmarshalGroups(getB(item, "eps"))
	if err != nil {
		return e, fmt.Errorf("decode endpoints of %s from %s: %w: %w", ek.Service, ek.ClusterID, errBadItem, err)
	}
	e.EndpointGroups = groups
	return e, nil
}

var errConcurrentWrite = errors.New("the export changed while it was read")

// appendMerged appends chunked groups, joining a group that was split across chunks.
func appendMerged(dst, src []*registryv1.EndpointGroup) []*registryv1.EndpointGroup {
	for i, g := range src {
		if i == 0 && len(dst) > 0 {
			last := dst[len(dst)-1]
			if last.GetAddressType() == g.GetAddressType() && slices.EqualFunc(last.GetPorts(), g.GetPorts(), func(x, y *registryv1.EndpointPort) bool { return proto.Equal(x, y) }) {
				last.Endpoints = append(last.Endpoints, g.GetEndpoints()...)
				continue
			}
		}
		dst = append(dst, g)
	}
	return dst
}

// listExports reads exports with a sort-key prefix, retrying when a large export changed
// while its chunks were read.
func (st *Store) listExports(ctx context.Context, clusterset, prefix string) ([]store.Export, error) {
	for attempt := 0; ; attempt++ {
		items, err := st.query(ctx, clusterset, prefix)
		if err != nil {
			return nil, err
		}
		out := make([]store.Export, 0, len(items))
		retry := false
		for _, it := range items {
			e, err := st.exportFrom(ctx, clusterset, it)
			if errors.Is(err, errConcurrentWrite) && attempt < 5 {
				retry = true
				break
			}
			if errors.Is(err, errBadItem) {
				st.badItem(pk(clusterset), getS(it, attrSK), err)
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if !retry {
			sort.Slice(out, func(i, j int) bool {
				if out[i].Service != out[j].Service {
					return out[i].Service.Less(out[j].Service)
				}
				return out[i].ClusterID < out[j].ClusterID
			})
			return out, nil
		}
	}
}

// ListExports implements store.Store.
func (st *Store) ListExports(ctx context.Context, clusterset string) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, "EXPORT#")
}

// ListServiceExports implements store.Store.
func (st *Store) ListServiceExports(ctx context.Context, clusterset string, svc store.ServiceKey) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, exportPrefix(svc))
}

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
