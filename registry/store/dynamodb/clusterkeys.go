package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// A cluster's export keys. Export items are keyed by Service first — a Service's exports
// are one Query, which every replica's refresh of a change needs — so one cluster's
// exports (its sync's check, its list) would be a Query of every export item of the
// clusterset, read and charged whole: at 100 clusters of 20 exports, about 1,000 read
// units per check, growing with every cluster. So each cluster has an item listing the
// Services it exports, SK "USAGE#<cluster>#KEYS": svcs (a string set of
// "<namespace>/<name>") and v (counts its changes). The transaction that creates or
// deletes an export changes it; a write over an existing export (a readiness flip) does
// not, so it costs a write only when the set changes. Its sort key sits right after the
// usage item's, so one small Query reads both. The "USAGE#" prefix keeps it out of every
// reader of an earlier release: they skip USAGE# stream records.
//
// The keys are trusted only when their count is the usage item's uX (which every write of
// every release since quotas keeps exact, in its transaction) and every key's export item
// exists: a set that agrees in count but differs in content names an item that does not
// exist. Otherwise — a table written by an earlier release, or such a replica writing now —
// the cluster's exports are read with the clusterset Query as before, and its keys (and a
// missing usage item) are written again from it, on condition that v did not change since
// the keys were read.

// MaxExportsPerCluster is the most exports one cluster may hold with this store (its
// --max-exports-per-cluster): its keys item lists them all, up to 127 bytes each
// ("<namespace>/<name>", two DNS labels), within DynamoDB's 400 KB item size.
const MaxExportsPerCluster = 3000

// keysSuffix ends the sort key of a cluster's keys item (after its usage item's).
const keysSuffix = "#KEYS"

func keysSK(clusterID string) string { return usageSK(clusterID) + keysSuffix }

// keyReads bounds the export items one cluster's read gets at once.
const keyReads = 8

// keysChange is the transaction item that adds (or removes) Services to (from) the
// cluster's keys and counts the change.
func (st *Store) keysChange(p, clusterID string, remove bool, svcs ...store.ServiceKey) types.TransactWriteItem {
	set := make([]string, 0, len(svcs))
	for _, s := range svcs {
		set = append(set, s.String())
	}
	slices.Sort(set)
	set = slices.Compact(set)
	update := "ADD v :one, svcs :s"
	if remove {
		update = "ADD v :one DELETE svcs :s"
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: &st.table, Key: key(p, keysSK(clusterID)),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": numAttr(1), ":s": &types.AttributeValueMemberSS{Value: set}}}}
}

// clusterKeys is what the table holds of a cluster's keys and usage.
type clusterKeys struct {
	svcs     []store.ServiceKey
	v        int64
	hasKeys  bool
	hasUsage bool
	usage    store.Usage
	// bad: a key that does not name a Service; the keys are not trusted.
	bad bool
}

// trusted: the keys may stand for the cluster's exports (the items still have to exist).
func (c clusterKeys) trusted() bool {
	return c.hasKeys && c.hasUsage && !c.bad && len(c.svcs) == c.usage.Exports
}

// readKeys reads the cluster's usage and keys items with one Query of the two sort keys.
func (st *Store) readKeys(ctx context.Context, k store.ClusterKey) (clusterKeys, error) {
	out, err := st.api.Query(ctx, &dynamodb.QueryInput{
		TableName: &st.table,
		// Cluster IDs are DNS labels: every character sorts after '#', so no other
		// cluster's items fall between the two keys.
		KeyConditionExpression: aws.String("PK = :pk AND SK BETWEEN :u AND :k"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": strAttr(pk(k.Clusterset)), ":u": strAttr(usageSK(k.ClusterID)), ":k": strAttr(keysSK(k.ClusterID)),
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return clusterKeys{}, unavailable("read the cluster's export keys", err)
	}
	var c clusterKeys
	for _, it := range out.Items {
		switch getS(it, attrSK) {
		case usageSK(k.ClusterID):
			c.hasUsage = true
			c.usage = usageFrom(it)
		case keysSK(k.ClusterID):
			c.hasKeys, c.v = true, getN(it, "v")
			ss, _ := it["svcs"].(*types.AttributeValueMemberSS)
			if ss == nil {
				continue
			}
			for _, s := range ss.Value {
				svc, err := parseServiceKey(s)
				if err != nil {
					c.bad = true
					st.badItem(pk(k.Clusterset), keysSK(k.ClusterID), fmt.Errorf("%w: export key %q: %w", errBadItem, s, err))
					continue
				}
				c.svcs = append(c.svcs, svc)
			}
		}
	}
	return c, nil
}

// parseServiceKey reads "<namespace>/<name>" as parseExportSK checks it.
func parseServiceKey(s string) (store.ServiceKey, error) {
	ek, err := parseExportSK("EXPORT#" + s + "#x")
	return ek.Service, err
}

// clusterItems returns the cluster's export items, with the projection (which must hold
// SK) or whole: through its keys when they are trusted and complete, else with the
// clusterset Query, writing the keys again from what it found.
func (st *Store) clusterItems(ctx context.Context, k store.ClusterKey, projection string, names map[string]string) ([]map[string]types.AttributeValue, error) {
	keys, err := st.readKeys(ctx, k)
	if err != nil {
		return nil, err
	}
	if keys.trusted() {
		items, complete, err := st.getExports(ctx, k, keys.svcs, projection, names)
		if err != nil || complete {
			return items, err
		}
	}
	mine, err := st.queryCluster(ctx, k, projection, names)
	if err != nil {
		return nil, err
	}
	if err := st.rewriteKeys(ctx, k, keys, mine); err != nil {
		// It costs only the cluster's next read, which queries again.
		st.dropped("cluster_keys", err)
	}
	return mine, nil
}

// queryCluster reads the cluster's export items with the clusterset Query.
func (st *Store) queryCluster(ctx context.Context, k store.ClusterKey, projection string, names map[string]string) ([]map[string]types.AttributeValue, error) {
	all, err := st.queryProjected(ctx, k.Clusterset, "EXPORT#", projection, names)
	if err != nil {
		return nil, err
	}
	var mine []map[string]types.AttributeValue
	for _, it := range all {
		// A key that names no cluster belongs to none; ListUnreadable reports it.
		if ek, err := exportKeyFrom(it); err == nil && ek.ClusterID == k.ClusterID {
			mine = append(mine, it)
		}
	}
	return mine, nil
}

// countUsage creates the cluster's usage item (and its keys) from what the table holds of
// it, unless another replica did first.
func (st *Store) countUsage(ctx context.Context, k store.ClusterKey) error {
	keys, err := st.readKeys(ctx, k)
	if err != nil {
		return err
	}
	mine, err := st.queryCluster(ctx, k, "", nil)
	if err != nil {
		return err
	}
	return st.rewriteKeys(ctx, k, keys, mine)
}

// getExports reads the export items of svcs, at most keyReads at once, in key order;
// complete is false when one of them does not exist.
func (st *Store) getExports(ctx context.Context, k store.ClusterKey, svcs []store.ServiceKey, projection string, names map[string]string) (items []map[string]types.AttributeValue, complete bool, err error) {
	items = make([]map[string]types.AttributeValue, len(svcs))
	var proj *string
	if projection != "" {
		proj = aws.String(projection)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(keyReads)
	for i, svc := range svcs {
		g.Go(func() error {
			out, err := st.api.GetItem(gctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key(pk(k.Clusterset), exportSK(svc, k.ClusterID)),
				ProjectionExpression: proj, ExpressionAttributeNames: names, ConsistentRead: aws.Bool(true)})
			if err != nil {
				return unavailable("get export", err)
			}
			items[i] = out.Item
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	for _, it := range items {
		if len(it) == 0 {
			return nil, false, nil
		}
	}
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
		return strings.Compare(getS(a, attrSK), getS(b, attrSK))
	})
	return items, true, nil
}

// rewriteKeys writes the cluster's keys as the Query found its export items (and its
// usage item, when it has none), in one transaction on condition that the cluster exists
// (no items for an unknown or deleted cluster) and that its keys did not change since
// they were read. A refused condition writes nothing, and the next read queries again.
func (st *Store) rewriteKeys(ctx context.Context, k store.ClusterKey, was clusterKeys, mine []map[string]types.AttributeValue) error {
	p := pk(k.Clusterset)
	items := []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{TableName: &st.table, Key: key(p, clusterSK(k.ClusterID)),
		ConditionExpression: aws.String("attribute_exists(PK)")}}}
	if !was.hasUsage {
		var u store.Usage
		for _, it := range mine {
			u = u.Add(st.weightOf(ctx, k.Clusterset, it))
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &st.table, Item: usageItem(p, k.ClusterID, u),
			ConditionExpression: aws.String("attribute_not_exists(PK)")}})
	}
	set := make([]string, 0, len(mine))
	for _, it := range mine {
		if ek, err := exportKeyFrom(it); err == nil {
			set = append(set, ek.Service.String())
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	item := map[string]types.AttributeValue{attrPK: strAttr(p), attrSK: strAttr(keysSK(k.ClusterID)), "v": numAttr(was.v + 1)}
	if len(set) > 0 {
		item["svcs"] = &types.AttributeValueMemberSS{Value: set}
	}
	put := &types.Put{TableName: &st.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(PK)")}
	if was.hasKeys {
		put.ConditionExpression = aws.String("v = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": numAttr(was.v)}
	}
	items = append(items, types.TransactWriteItem{Put: put})
	err := st.transact(ctx, items)
	var tce *types.TransactionCanceledException
	if err == nil || errors.As(err, &tce) && !isTransactionConflict(err) {
		return nil // written, or a condition refused it: the cluster is gone or changed
	}
	return unavailable("write the cluster's export keys", err)
}

// countNewCluster creates a new cluster's usage (nothing) and keys (none), so its first
// sync reads them rather than the clusterset Query; on condition that neither exists and
// that the cluster is still the one this registration created (its fence). The cluster is
// registered whether or not its caller still waits, so this is done either way, as urgent
// as the registration: a first sync that found neither would query the clusterset. A
// failure costs only that first read.
func (st *Store) countNewCluster(ctx context.Context, k store.ClusterKey, fence int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	p := pk(k.Clusterset)
	err := st.transact(ctx, []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: &st.table, Key: key(p, clusterSK(k.ClusterID)),
			ConditionExpression: aws.String("fenceUs = :f"), ExpressionAttributeValues: map[string]types.AttributeValue{":f": numAttr(fence)}}},
		{Put: &types.Put{TableName: &st.table, Item: usageItem(p, k.ClusterID, store.Usage{}), ConditionExpression: aws.String("attribute_not_exists(PK)")}},
		{Put: &types.Put{TableName: &st.table, Item: map[string]types.AttributeValue{
			attrPK: strAttr(p), attrSK: strAttr(keysSK(k.ClusterID)), "v": numAttr(1),
		}, ConditionExpression: aws.String("attribute_not_exists(PK)")}},
	})
	var tce *types.TransactionCanceledException
	if err != nil && (!errors.As(err, &tce) || isTransactionConflict(err)) {
		st.dropped("cluster_keys", fmt.Errorf("count new cluster %s/%s: %w", k.Clusterset, k.ClusterID, err))
	}
}
