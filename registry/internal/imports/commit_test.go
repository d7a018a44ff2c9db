package imports

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestGroupCommit: concurrent refreshes are applied in few batches, each caller's keys and
// known exports together in one batch that has finished when the caller returns.
func TestGroupCommit(t *testing.T) {
	var g groupCommit
	var mu sync.Mutex
	applied := map[store.ServiceKey]int{} // key -> batch number
	batches := 0
	apply := func(_ context.Context, keys []store.ServiceKey, known []store.Export) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		batches++
		for _, k := range keys {
			applied[k] = batches
		}
		for _, e := range known {
			applied[e.Service] = batches
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
			known := []store.Export{{Service: store.ServiceKey{Namespace: "c", Name: fmt.Sprint(i)}}}
			if err := g.do(context.Background(), keys, known, apply); err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if applied[keys[0]] == 0 || applied[keys[0]] != applied[keys[1]] || applied[keys[0]] != applied[known[0].Service] {
				t.Errorf("caller %d returned before its keys and exports were applied together: %d %d %d", i, applied[keys[0]], applied[keys[1]], applied[known[0].Service])
			}
		}()
	}
	wg.Wait()
	if batches >= callers/2 {
		t.Fatalf("%d callers took %d batches; want far fewer", callers, batches)
	}
	t.Logf("%d concurrent refreshes in %d batches", callers, batches)
}
