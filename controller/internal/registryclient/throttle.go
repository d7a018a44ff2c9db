package registryclient

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryDelay reports a refusal that says when to retry: RESOURCE_EXHAUSTED with a
// RetryInfo, which the registry sends to a client over its share of a replica
// (--client-rate). A quota refusal carries no RetryInfo: retrying soon would not help.
func RetryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok && info.GetRetryDelay() != nil {
			return max(info.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// maxHintedWait bounds how long one call waits in all for the registry's retry hints
// before it gives up on the URL (and tries the next one, which keeps its own shares).
const maxHintedWait = 30 * time.Second

// honourRetryHints runs fn, and runs it again after the registry's retry hint for as long
// as the registry names one, ctx lasts and the waits stay within maxHintedWait. Each wait
// is the hint and up to a tenth more, so clients refused together do not return together.
func honourRetryHints(ctx context.Context, fn func() error) error {
	var waited time.Duration
	for {
		err := fn()
		d, ok := RetryDelay(err)
		if !ok {
			return err
		}
		d += time.Duration(rand.Int64N(int64(d/10) + 1)) //nolint:gosec // G404: jitter, not a secret.
		if waited+d > maxHintedWait {
			return err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += d
	}
}
