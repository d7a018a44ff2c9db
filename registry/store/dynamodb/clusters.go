package dynamodb

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

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
		RenewRegion: getS(item, "renewRegion"), ControllerVersion: getS(item, "ctlVersion"),
	}, nil
}

// RegisterCluster implements store.Store.
func (st *Store) RegisterCluster(ctx context.Context, c store.Cluster) (store.Cluster, error) {
	ctx = withUrgency(ctx)
	us := st.now().UnixMicro()
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table,
		Key:       key(pk(c.Clusterset), clusterSK(c.ClusterID)),
		// A new cluster's fence is its registration: no export write from before it (of a
		// deleted cluster of the same name) applies.
		UpdateExpression:          aws.String("SET #r = :r, leaseMs = :l, renewMs = :now, renewRegion = :rr, ctlVersion = :cv, registerMs = if_not_exists(registerMs, :now), fenceUs = if_not_exists(fenceUs, :us)"),
		ExpressionAttributeNames:  map[string]string{"#r": "region"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": strAttr(c.Region), ":l": numAttr(c.LeaseDuration.Milliseconds()), ":now": numAttr(ms(c.RenewTime)), ":rr": strAttr(st.region), ":cv": strAttr(c.ControllerVersion), ":us": numAttr(us)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return store.Cluster{}, unavailable("register cluster", err)
	}
	if getN(out.Attributes, "fenceUs") == us {
		// The cluster is new (its fence is this registration's): it holds nothing yet.
		st.countNewCluster(ctx, store.ClusterKey{Clusterset: c.Clusterset, ClusterID: c.ClusterID}, us)
	}
	return clusterFrom(c.Clusterset, out.Attributes)
}

// RenewLease implements store.Store. The condition makes sure a renewal never creates a
// cluster that was deleted, in this region or (after replication) in another.
func (st *Store) RenewLease(ctx context.Context, k store.ClusterKey, now time.Time) (store.Cluster, error) {
	ctx = withUrgency(ctx)
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &st.table,
		Key:                       key(pk(k.Clusterset), clusterSK(k.ClusterID)),
		UpdateExpression:          aws.String("SET renewMs = :now, renewRegion = :rr"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": numAttr(ms(now)), ":rr": strAttr(st.region)},
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
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAttr(pk(clusterset)), ":p": strAttr(prefix)},
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
	items, err := st.clusterItems(ctx, k, "SK", nil)
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
		// The cluster item is gone, so no write of its exports applies any more; its usage
		// item goes after them.
		if _, err := st.deleteExportItem(ctx, k, e.Service, st.now().UnixMicro(), false); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, st.deleteUsage(ctx, k)
}
