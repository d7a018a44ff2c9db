package imports

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestGroupCommit: concurrent refreshes are applied in few batches, each caller's keys
// together in one batch that has finished when the caller returns.
func TestGroupCommit(t *testing.T) {
	var g groupCommit
	var mu sync.Mutex
	applied := map[store.ServiceKey]int{} // key -> batch number
	batches := 0
	apply := func(_ context.Context, keys []store.ServiceKey) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		batches++
		for _, k := range keys {
			applied[k] = batches
		}
		return nil
	}
	const callers = 50
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := []store.ServiceKey{{Namespace: "a", Name: fmt.Sprint(i)}, {Namespace: "b", Name: fmt.Sprint(i)}, {Namespace: "shared", Name: "x"}}
			if err := g.do(context.Background(), keys, apply); err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if applied[keys[0]] == 0 || applied[keys[0]] != applied[keys[1]] {
				t.Errorf("caller %d returned before its keys were applied together: %d %d", i, applied[keys[0]], applied[keys[1]])
			}
		}()
	}
	wg.Wait()
	if batches >= callers/2 {
		t.Fatalf("%d callers took %d batches; want far fewer", callers, batches)
	}
	t.Logf("%d concurrent refreshes in %d batches", callers, batches)
}
