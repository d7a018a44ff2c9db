package registryclient

import (
	"testing"
	"time"
)

// renewWait comes at most a tenth of the interval early (half, right after a registration),
// never late, and spreads: clusters that registered together do not renew together.
func TestRenewWait(t *testing.T) {
	for _, tc := range []struct {
		name       string
		interval   time.Duration
		registered bool
		lo         time.Duration
	}{
		{"renewal", 10 * time.Second, false, 9 * time.Second},
		{"after a registration", 10 * time.Second, true, 5 * time.Second},
		{"an interval too short to spread", 5 * time.Nanosecond, false, 5 * time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 1000 {
				w := renewWait(tc.interval, tc.registered)
				if w < tc.lo || w > tc.interval {
					t.Fatalf("wait %s, want within [%s, %s]", w, tc.lo, tc.interval)
				}
				seen[w] = true
			}
			if tc.lo < tc.interval && len(seen) < 100 {
				t.Errorf("1,000 waits took %d values: not spread", len(seen))
			}
		})
	}
}
