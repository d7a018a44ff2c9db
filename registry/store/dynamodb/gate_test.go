package dynamodb

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestGate: the slots are bounded; a waiter whose caller leaves is not served and takes no
// slot; urgent waiters are served before others that came first, each kind in order.
func TestGate(t *testing.T) {
	var waiting, abandoned atomic.Int64
	g := newGate(1, func(d int) { waiting.Add(int64(d)) }, func() { abandoned.Add(1) })
	ctx := context.Background()
	if err := g.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	wait := func(name string, urgent bool) {
		go func() {
			if err := g.acquire(ctx, urgent); err != nil {
				order <- name + ": " + err.Error()
				return
			}
			order <- name
			g.release()
		}()
	}
	until := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); waiting.Load() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", waiting.Load(), n)
			}
		}
	}
	wait("bulk-1", false)
	until(1)
	gone, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { left <- g.acquire(gone, false) }()
	until(2)
	wait("bulk-2", false)
	until(3)
	wait("urgent", true)
	until(4)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose caller left: %v, want context.Canceled", err)
	}
	if abandoned.Load() != 1 {
		t.Errorf("abandoned %d, want 1", abandoned.Load())
	}
	g.release()
	var got []string
	for range 3 {
		got = append(got, <-order)
	}
	if want := []string{"urgent", "bulk-1", "bulk-2"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
	// The last one served releases its slot after it reported.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		free := g.free
		g.mu.Unlock()
		if free == 1 && waiting.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every release: %d free, %d waiting; want 1 and 0", free, waiting.Load())
		}
	}
}
