package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// groupAPI answers transactions as DynamoDB does for what the committer may do wrong: an
// item named twice in one transaction is a ValidationException, an item in two
// transactions at once a TransactionConflict; an item in refuse fails its condition.
type groupAPI struct {
	API
	mu       sync.Mutex
	inFlight map[string]bool
	refuse   map[string]bool
	sizes    []int
	applied  map[string]int
	problems []string
}

func (a *groupAPI) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	keys := itemKeys(in.TransactItems)
	a.mu.Lock()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			a.problems = append(a.problems, "an item twice in one transaction: "+k)
			a.mu.Unlock()
			return nil, errors.New("ValidationException: Transaction request cannot include multiple operations on one item")
		}
		seen[k] = true
		if a.inFlight[k] {
			a.problems = append(a.problems, "an item in two transactions at once: "+k)
		}
		a.inFlight[k] = true
	}
	a.sizes = append(a.sizes, len(in.TransactItems))
	a.mu.Unlock()
	time.Sleep(3 * time.Millisecond)
	a.mu.Lock()
	defer a.mu.Unlock()
	reasons := make([]types.CancellationReason, len(keys))
	refused := false
	for i, k := range keys {
		delete(a.inFlight, k)
		reasons[i].Code = aws.String("None")
		if a.refuse[k] {
			reasons[i].Code, refused = aws.String("ConditionalCheckFailed"), true
		}
	}
	if refused {
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	for _, k := range keys {
		a.applied[k]++
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// TestGroupCommit: concurrent export writes of many clusters go in fewer transactions,
// each naming an item once and no item in two at once (so one cluster's writes go one at
// a time); a write its own condition refuses gets its own items' reasons, and the writes
// sent with it apply; the committer goes when idle.
func TestGroupCommit(t *testing.T) {
	api := &groupAPI{inFlight: map[string]bool{}, applied: map[string]int{}, refuse: map[string]bool{"CS#prod\x00EXPORT#ns/bad#c07": true}}
	st := New(Options{Client: api, Table: "t"})
	write := func(cluster, svc string) []types.TransactWriteItem {
		p := "CS#prod"
		return []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{Key: key(p, clusterSK(cluster))}},
			{Update: &types.Update{Key: key(p, usageSK(cluster))}},
			{Update: &types.Update{Key: key(p, "EXPORT#ns/"+svc+"#"+cluster)}},
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for c := range 20 {
		cluster := fmt.Sprintf("c%02d", c)
		wg.Go(func() {
			for i := range 20 {
				svc := fmt.Sprintf("svc-%d", i)
				if cluster == "c07" && i == 5 {
					svc = "bad"
				}
				if err := st.commit(context.Background(), "CS#prod", write(cluster, svc), 600); err != nil {
					errs <- fmt.Errorf("%s/%s: %w", cluster, svc, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	var tce *types.TransactionCanceledException
	if len(failed) != 1 || !errors.As(failed[0], &tce) || len(tce.CancellationReasons) != 3 || aws.ToString(tce.CancellationReasons[2].Code) != "ConditionalCheckFailed" {
		t.Fatalf("errors %v; want one, for c07/bad, with its own 3 reasons (its export's condition failed)", failed)
	}
	if len(api.problems) > 0 {
		t.Fatalf("transactions DynamoDB refuses: %v", api.problems[:min(5, len(api.problems))])
	}
	for c := range 20 {
		cluster := fmt.Sprintf("c%02d", c)
		want := 20
		if cluster == "c07" {
			want = 19
		}
		if got := api.applied["CS#prod\x00"+usageSK(cluster)]; got != want {
			t.Errorf("%s: %d writes applied, want %d", cluster, got, want)
		}
	}
	if len(api.sizes) >= 400 {
		t.Errorf("%d transactions for 400 writes of 20 clusters at once: none grouped", len(api.sizes))
	}
	t.Logf("400 writes in %d transactions", len(api.sizes))
	// A write whose caller left is not sent.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	sent := len(api.sizes)
	if err := st.commit(gone, "CS#prod", write("c00", "late"), 600); !errors.Is(err, context.Canceled) {
		t.Errorf("a write whose caller left: %v, want context.Canceled", err)
	}
	if len(api.sizes) != sent || api.applied["CS#prod\x00EXPORT#ns/late#c00"] != 0 {
		t.Error("a write whose caller left was sent")
	}
	// Idle, the clusterset's committer goes: they are as many as the clustersets being written.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st.commits.mu.Lock()
		n := len(st.commits.all)
		st.commits.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d committers kept after every write ended, want 0", n)
		}
	}
}
