package dynamodb

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// conflictingAPI answers what a sync asks: its cluster, no exports held, and transactions
// that DynamoDB refuses with TransactionConflict while another is in flight (as it does
// for transactions on one item), and the first `refuse` times in any case.
type conflictingAPI struct {
	API
	refuse    atomic.Int64
	inFlight  atomic.Int64
	maxFlight atomic.Int64
	calls     atomic.Int64
	mu        sync.Mutex
	written   int
}

func conflict(n int) error {
	reasons := make([]types.CancellationReason, n)
	reasons[0].Code = aws.String("TransactionConflict")
	for i := 1; i < n; i++ {
		reasons[i].Code = aws.String("None")
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

func (a *conflictingAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{attrPK: strAttr("CS#prod"), attrSK: strAttr("CLUSTER#a"), "leaseMs": numAttr(60000), "renewMs": numAttr(time.Now().UnixMilli())}}, nil
}

func (a *conflictingAPI) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{}, nil
}

// exportWrites counts a transaction's export items.
func exportWrites(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		if it.Update != nil && strings.HasPrefix(getS(it.Update.Key, attrSK), "EXPORT#") {
			n++
		}
	}
	return n
}

func (a *conflictingAPI) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	exports := exportWrites(in.TransactItems)
	if exports == 0 {
		return &dynamodb.TransactWriteItemsOutput{}, nil // the cluster's keys, counted once
	}
	a.calls.Add(1)
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	for {
		m := a.maxFlight.Load()
		if n <= m || a.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	if n > 1 || a.refuse.Add(-1) >= 0 {
		return nil, conflict(len(in.TransactItems))
	}
	a.mu.Lock()
	a.written += exports
	a.mu.Unlock()
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// TestSyncTransactionsOneAtATime: a sync's transactions all check its cluster's item (and
// change its usage item), so
// they are sent one at a time, and one refused for a conflict with another transaction is
// sent again; every export is written.
func TestSyncTransactionsOneAtATime(t *testing.T) {
	api := &conflictingAPI{}
	api.refuse.Store(2)
	st := New(Options{Client: api, Table: "t"})
	exports := make([]store.Export, 250)
	for i := range exports {
		exports[i] = store.Export{Clusterset: "prod", ClusterID: "a", Service: store.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%03d", i)},
			CreateTime: time.Now(), UpdateTime: time.Now()}
	}
	stored, _, err := st.SyncExports(context.Background(), store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, exports)
	if err != nil {
		t.Fatalf("SyncExports: %v", err)
	}
	if len(stored) != len(exports) || api.written != len(exports) {
		t.Fatalf("stored %d, written %d; want %d", len(stored), api.written, len(exports))
	}
	if got := api.maxFlight.Load(); got != 1 {
		t.Fatalf("%d transactions of one sync in flight at once, want 1", got)
	}
	if got := api.calls.Load(); got != 3+2 {
		t.Fatalf("%d transactions sent; want 3 batches and 2 sent again after a conflict", got)
	}
}

func TestIsTransactionConflict(t *testing.T) {
	condFailed := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("ConditionalCheckFailed")}}}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{conflict(3), true},
		{condFailed, false},
		{&types.TransactionCanceledException{}, false},
		{fmt.Errorf("wrapped: %w", conflict(2)), true},
		{nil, false},
	} {
		if got := isTransactionConflict(c.err); got != c.want {
			t.Errorf("isTransactionConflict(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
