// Package ratelimit gives each client its share of a registry replica: a token bucket per
// client (caller.Of), charged for what each request costs, checked at the door. A client
// over its share is refused before its request is read or decoded, with RESOURCE_EXHAUSTED
// and the time after which it may retry, so a refusal costs the registry far less than
// the request would have; every other client keeps its own share.
//
// A request costs one unit, plus one for every UnitBytes of its message, charged once the
// message is read: what a client cannot know before it sends, it pays after. A client is
// admitted while its bucket is not in debt; one request can take it at most Burst into
// debt, so the longest wait after any request is Burst/Rate.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// UnitBytes are the bytes of a request message that cost one unit more: about what
// decoding and validating them costs, the same as the fixed work of one small request.
const UnitBytes = 16 << 10

// Share is what one client may spend: Rate units a second, up to Burst units at once.
type Share struct {
	// Rate is --client-rate; 0: no limit.
	Rate float64
	// Burst is --client-burst.
	Burst float64
}

// Limiter holds the buckets of the clients of one replica.
type Limiter struct {
	share Share
	now   func() time.Time
	// throttled is told of each refusal, for the per-client count.
	throttled func(client string)

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
	// door is held while one refusal of the client is delayed (DelayRefusal).
	door chan struct{}
}

// maxClients bounds the buckets held: past it, full buckets (which hold nothing a new
// bucket would not) are dropped, at most once a second; clients that still find no room
// share one bucket, so a client with very many addresses cannot grow the registry.
const maxClients = 100_000

// overflow is the bucket shared past maxClients.
const overflow = "\x00overflow"

// New returns a Limiter; throttled (nil: nobody) is told the client of every refusal.
func New(share Share, throttled func(client string)) *Limiter {
	if throttled == nil {
		throttled = func(string) {}
	}
	return &Limiter{share: share, now: time.Now, throttled: throttled, buckets: map[string]*bucket{}}
}

// Enabled reports whether the limiter limits anything.
func (l *Limiter) Enabled() bool { return l != nil && l.share.Rate > 0 }

// Admit takes one unit from the client's bucket and reports true, or reports false and how
// long the client must wait before its bucket is out of debt. The client "" (no name) is
// always admitted.
func (l *Limiter) Admit(client string) (time.Duration, bool) {
	if !l.Enabled() || client == "" {
		return 0, true
	}
	l.mu.Lock()
	b := l.bucketLocked(client)
	if b.tokens < 0 {
		wait := time.Duration(math.Ceil(-b.tokens / l.share.Rate * float64(time.Second)))
		l.mu.Unlock()
		l.throttled(client)
		return max(wait, time.Millisecond), false
	}
	b.tokens--
	l.mu.Unlock()
	return 0, true
}

// MaxRefusalDelay is how long a refusal is delayed before it is sent: one at a time per client.
const MaxRefusalDelay = 20 * time.Millisecond

// DelayRefusal delays a refusal of the client by up to MaxRefusalDelay (never past its wait), one
// refusal at a time per client, and returns the wait left. Called where the refused call
// arrived (a gRPC connection's reader, a REST request's handler), it stops reading from
// that client meanwhile, so a client that ignores its retry hints and sends again at once,
// on as many connections as it likes, makes the registry refuse at most 1/MaxRefusalDelay calls a
// second: what it costs the registry stays small, not just what it gets.
func (l *Limiter) DelayRefusal(ctx context.Context, client string, wait time.Duration) time.Duration {
	delay := min(wait, MaxRefusalDelay)
	l.mu.Lock()
	b := l.bucketLocked(client)
	if b.door == nil {
		b.door = make(chan struct{}, 1)
	}
	door := b.door
	l.mu.Unlock()
	start := l.now()
	select {
	case door <- struct{}{}:
	case <-ctx.Done():
		return wait
	}
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	<-door
	return max(wait-l.now().Sub(start), time.Millisecond)
}

// Charge takes units from the client's bucket for what its admitted request turned out to
// cost; the bucket goes at most Burst into debt.
func (l *Limiter) Charge(client string, units float64) {
	if !l.Enabled() || client == "" || units <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(client)
	b.tokens = max(b.tokens-units, -l.share.Burst)
}

// ChargeBytes charges the bytes of a request's message.
func (l *Limiter) ChargeBytes(client string, n int) { l.Charge(client, float64(n)/UnitBytes) }

// Refusal is the message of a refused request.
func (l *Limiter) Refusal(client string, wait time.Duration) string {
	return fmt.Sprintf("%s is over its share of this registry replica: %g units a second (--client-rate), at most %g at once (--client-burst); a request costs 1 unit, and 1 more for every 16 KiB of its message; nothing was done; retry in %s",
		client, l.share.Rate, l.share.Burst, wait.Round(time.Millisecond))
}

// bucketLocked returns the client's bucket brought up to now; l.mu is held.
func (l *Limiter) bucketLocked(client string) *bucket {
	now := l.now()
	b := l.buckets[client]
	if b == nil {
		if len(l.buckets) >= maxClients {
			l.sweepLocked(now)
			if len(l.buckets) >= maxClients {
				client = overflow
				b = l.buckets[client]
			}
		}
		if b == nil {
			b = &bucket{tokens: l.share.Burst, at: now}
			l.buckets[client] = b
		}
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(b.tokens+d.Seconds()*l.share.Rate, l.share.Burst)
		b.at = now
	}
	return b
}

// sweepLocked drops the buckets that are full by now, at most once a second.
func (l *Limiter) sweepLocked(now time.Time) {
	if now.Sub(l.lastSweep) < time.Second {
		return
	}
	l.lastSweep = now
	for c, b := range l.buckets {
		if c != overflow && b.tokens+now.Sub(b.at).Seconds()*l.share.Rate >= l.share.Burst {
			delete(l.buckets, c)
		}
	}
}
