package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// A cluster's usage (its exports, their endpoints and bytes) is an item of its own,
// SK "USAGE#<cluster>" (uX, uE, uB), changed in the same transaction as every write and
// delete of one of its exports, on the condition that the write keeps it within the
// store's Quota. So replicas sharing the table never let a cluster past a quota together:
// each checks what the table holds, not what its cache holds. Each export item records
// its own weight (nE, nB) for the change its replacement or deletion makes. The usage
// item is created on a cluster's first write by counting what the table holds of it (an
// existing table, written before usage was kept), and removed with the cluster.

func usageSK(clusterID string) string { return "USAGE#" + clusterID }

// errNoUsage: the cluster's usage item does not exist yet; count and create it.
var errNoUsage = errors.New("the cluster's usage is not counted yet")

// weightOf is the weight an export item recorded (nE, nB), or, for an item written before
// weights were kept, its weight decoded.
func (st *Store) weightOf(ctx context.Context, clusterset string, item map[string]types.AttributeValue) store.Usage {
	if _, ok := item["nB"]; ok {
		return store.Usage{Exports: 1, Endpoints: int(getN(item, "nE")), Bytes: int(getN(item, "nB"))}
	}
	if _, whole := item["spec"]; !whole {
		// A projection: read the whole item.
		out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key(pk(clusterset), getS(item, attrSK)), ConsistentRead: aws.Bool(true)})
		if err != nil || len(out.Item) == 0 {
			return store.Usage{Exports: 1}
		}
		item = out.Item
	}
	e, err := st.exportFrom(ctx, clusterset, item)
	if err != nil {
		return store.Usage{Exports: 1}
	}
	return store.Weight(e.Spec, e.EndpointGroups)
}

// usageUpdate changes a cluster's usage by delta, on the condition that the usage item
// exists and, for each quota delta grows, that the result stays within it. ok is false
// when delta alone passes a quota (the caller refuses without asking the table).
func (st *Store) usageUpdate(p, clusterID string, delta store.Usage) (item types.TransactWriteItem, ok bool) {
	values := map[string]types.AttributeValue{":dx": numAttr(int64(delta.Exports)), ":de": numAttr(int64(delta.Endpoints)), ":db": numAttr(int64(delta.Bytes))}
	cond := "attribute_exists(uX)"
	for _, c := range []struct {
		attr, name string
		d, max     int
	}{{"uX", ":cx", delta.Exports, st.quota.Exports}, {"uE", ":ce", delta.Endpoints, st.quota.Endpoints}, {"uB", ":cb", delta.Bytes, st.quota.Bytes}} {
		if c.max <= 0 || c.d <= 0 {
			continue
		}
		if c.max-c.d < 0 {
			return types.TransactWriteItem{}, false
		}
		cond += " AND " + c.attr + " <= " + c.name
		values[c.name] = numAttr(int64(c.max - c.d))
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &st.table, Key: key(p, usageSK(clusterID)),
		UpdateExpression:                    aws.String("SET uX = uX + :dx, uE = uE + :de, uB = uB + :db"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}, true
}

// usageFrom is the usage a usage item holds.
func usageFrom(item map[string]types.AttributeValue) store.Usage {
	return store.Usage{Exports: int(getN(item, "uX")), Endpoints: int(getN(item, "uE")), Bytes: int(getN(item, "uB"))}
}

// usageItem is a cluster's usage item holding u.
func usageItem(p, clusterID string, u store.Usage) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: strAttr(p), attrSK: strAttr(usageSK(clusterID)),
		"uX": numAttr(int64(u.Exports)), "uE": numAttr(int64(u.Endpoints)), "uB": numAttr(int64(u.Bytes))}
}

// usageRefusal is the error of a refused usage condition, from the usage item as it was.
func (st *Store) usageRefusal(k store.ClusterKey, old map[string]types.AttributeValue, delta store.Usage) error {
	if len(old) == 0 {
		return errNoUsage
	}
	stored := usageFrom(old)
	if err := st.quota.Check(k, stored.Add(delta)); err != nil {
		return err
	}
	// Not past a quota now: the usage changed between the refusal and its answer.
	return fmt.Errorf("usage of %s/%s changed: %w", k.Clusterset, k.ClusterID, errPriorChanged)
}

// quotaError is the refusal of a write whose own weight passes a quota.
func (st *Store) quotaError(k store.ClusterKey, delta store.Usage) error {
	if err := st.quota.Check(k, delta); err != nil {
		return err
	}
	return &store.QuotaError{Cluster: k, Limit: store.QuotaExports, Used: delta.Exports, Max: st.quota.Exports}
}

// deleteUsage removes a deleted cluster's usage and keys items.
func (st *Store) deleteUsage(ctx context.Context, k store.ClusterKey) error {
	for _, sk := range []string{usageSK(k.ClusterID), keysSK(k.ClusterID)} {
		if _, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(pk(k.Clusterset), sk)}); err != nil {
			return unavailable("delete the cluster's usage", err)
		}
	}
	return nil
}

// priorCheck is an export write's condition on what it replaces: the item as read (its
// writeUs), or no item.
func priorCheck(old *prior) (string, map[string]types.AttributeValue) {
	switch {
	case old == nil:
		return "attribute_not_exists(PK)", map[string]types.AttributeValue{}
	case old.writeUs == 0:
		return "attribute_exists(PK) AND attribute_not_exists(writeUs)", map[string]types.AttributeValue{}
	default:
		return "writeUs = :ow", map[string]types.AttributeValue{":ow": numAttr(old.writeUs)}
	}
}

// errPriorChanged: the export changed between its read and its write; read it again.
var errPriorChanged = errors.New("the export changed since it was read")
