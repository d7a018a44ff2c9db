package dynamodb

import (
	"context"
	"errors"
	mathrand "math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// transactAttempts bounds how often a transaction refused for a conflict with another
// transaction on one of its items (the cluster item, which every export write of the
// cluster checks) is sent again.
const transactAttempts = 5

// transact sends a transaction, again after a short wait while DynamoDB refuses it for a
// conflict with another transaction in progress on one of its items (the SDK retries
// TransactionInProgress, not this).
func (st *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	for attempt := 1; ; attempt++ {
		_, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if !isTransactionConflict(err) || attempt == transactAttempts {
			return err
		}
		wait := time.Duration(attempt)*10*time.Millisecond + time.Duration(mathrand.Int64N(int64(10*time.Millisecond))) //nolint:gosec // G404: jitter, not a secret.
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}

// isTransactionConflict: a transaction cancelled only because another one was in progress
// on one of its items; no condition of its own failed.
func isTransactionConflict(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "TransactionConflict":
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
}

// clusterCheck is a write's condition on its cluster: the cluster exists and no delete of
// its exports is newer than the write (time w, microseconds).
func clusterCheck(table *string, p, clusterID string, w int64) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: table, Key: key(p, clusterSK(clusterID)),
		ConditionExpression:                 aws.String("attribute_exists(PK) AND (attribute_not_exists(fenceUs) OR fenceUs < :w)"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":w": numAttr(w)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}
}

// exportUpdate is the write of an export item at time w over old, what it held when read
// (nil: nothing): it applies only while the item is still that.
func exportUpdate(table *string, p string, e store.Export, update string, values map[string]types.AttributeValue, w int64, old *prior) types.TransactWriteItem {
	values[":w"] = numAttr(w)
	cond, prior := priorCheck(old)
	for k, v := range prior {
		values[k] = v
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: table, Key: key(p, exportSK(e.Service, e.ClusterID)),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#sum": "sum"}, ExpressionAttributeValues: values}}
}

// delta is the usage a write of an export weighing w over old changes.
func delta(w store.Usage, old *prior) store.Usage {
	if old == nil {
		return w
	}
	return w.Sub(old.weight)
}
