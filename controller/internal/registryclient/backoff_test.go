package registryclient

import (
	"context"
	"testing"
	"time"
)

// TestBackoff: steps double from min to max and reset to min; each wait is within half to
// one and a half of its step; a cancelled context ends a wait at once.
func TestBackoff(t *testing.T) {
	b := newBackoff(time.Millisecond, 8*time.Millisecond)
	var steps []time.Duration
	for range 6 {
		steps = append(steps, b.current())
		start := time.Now()
		if !b.wait(context.Background()) {
			t.Fatal("wait ended without a cancelled context")
		}
		if took := time.Since(start); took < steps[len(steps)-1]/2 {
			t.Fatalf("waited %v for a step of %v", took, steps[len(steps)-1])
		}
	}
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i, s := range steps {
		if s != want[i]*time.Millisecond {
			t.Fatalf("steps %v, want %v ms", steps, want)
		}
	}
	b.reset()
	if b.current() != time.Millisecond {
		t.Fatalf("after reset the step is %v", b.current())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := newBackoff(time.Hour, time.Hour)
	if long.wait(ctx) {
		t.Fatal("a wait with a cancelled context did not end")
	}
}
