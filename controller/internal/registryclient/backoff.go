package registryclient

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the registry client's one retry schedule: waits double from min to max, with
// jitter (half to one and a half of the step) so that many controllers do not retry in
// step, and reset starts again at min.
type backoff struct{ lo, hi, step time.Duration }

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{lo: lo, hi: hi, step: lo} }

func (b *backoff) reset() { b.step = b.lo }

// current is the step the next wait is drawn from.
func (b *backoff) current() time.Duration { return b.step }

// wait sleeps one jittered step, or until ctx ends (false), and doubles the step.
func (b *backoff) wait(ctx context.Context) bool {
	d := b.step/2 + time.Duration(rand.Int64N(int64(b.step))) //nolint:gosec // G404: jitter, not a secret.
	if b.step *= 2; b.step > b.hi {
		b.step = b.hi
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
