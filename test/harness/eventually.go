package harness

import (
	"testing"
	"time"
)

// Eventually polls check every 100 ms until it returns "" and returns how long that took.
// A non-empty answer says what is still wrong; the last one is in the failure message when
// the timeout passes.
func Eventually(tb testing.TB, what string, timeout time.Duration, check func() string) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		last := check()
		if last == "" {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			tb.Fatalf("%s: not within %s:\n%s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
