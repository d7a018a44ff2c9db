package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// clock is a time the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newLimiter(s Share) (*Limiter, *clock) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := New(s, nil)
	l.now = c.now
	return l, c
}

// step is one thing a client does, and what the limiter must answer.
type step struct {
	advance time.Duration // before the step
	charge  float64       // charge these units (no Admit)
	admit   bool          // Admit; want is its answer
	want    bool
	wait    time.Duration // with want false: the wait Admit names
}

func TestLimiter(t *testing.T) {
	share := Share{Rate: 10, Burst: 5}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a burst is admitted, then one more is not", []step{
			{admit: true, want: true}, {admit: true, want: true}, {admit: true, want: true}, {admit: true, want: true}, {admit: true, want: true},
			// 0 tokens left: not in debt, admitted, now -1.
			{admit: true, want: true},
			{admit: true, want: false, wait: 100 * time.Millisecond},
		}},
		{"the rate refills", []step{
			{charge: 5}, {admit: true, want: true}, // 0 → -1
			{admit: true, want: false, wait: 100 * time.Millisecond},
			{advance: 100 * time.Millisecond, admit: true, want: true},
		}},
		{"a large message puts the client in debt, at most one burst", []step{
			{admit: true, want: true}, {charge: 1000},
			{admit: true, want: false, wait: 500 * time.Millisecond},
			{advance: 490 * time.Millisecond, admit: true, want: false, wait: 10 * time.Millisecond},
			{advance: 10 * time.Millisecond, admit: true, want: true},
		}},
		{"a bucket holds at most its burst", []step{
			{advance: time.Hour, charge: 5}, {admit: true, want: true},
			{admit: true, want: false, wait: 100 * time.Millisecond},
		}},
		{"a refusal costs nothing", []step{
			{charge: 6},
			{admit: true, want: false, wait: 100 * time.Millisecond},
			{admit: true, want: false, wait: 100 * time.Millisecond},
			{advance: 100 * time.Millisecond, admit: true, want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, c := newLimiter(share)
			for i, s := range tt.steps {
				c.advance(s.advance)
				if s.charge > 0 {
					l.Charge("a", s.charge)
				}
				if !s.admit {
					continue
				}
				wait, ok := l.Admit("a")
				if ok != s.want || (!ok && wait.Round(time.Millisecond) != s.wait) {
					t.Fatalf("step %d: Admit = %v, %v; want %v, %v", i, wait, ok, s.want, s.wait)
				}
			}
		})
	}
}

func TestClientsAreApart(t *testing.T) {
	l, _ := newLimiter(Share{Rate: 1, Burst: 1})
	l.Charge("flood", 100)
	if _, ok := l.Admit("flood"); ok {
		t.Fatal("a client in debt was admitted")
	}
	if _, ok := l.Admit("bystander"); !ok {
		t.Fatal("a client was refused for another's debt")
	}
	if _, ok := l.Admit(""); !ok {
		t.Fatal("an unnamed caller (in process) was refused")
	}
	if _, ok := New(Share{}, nil).Admit("flood"); !ok {
		t.Fatal("rate 0 must not limit")
	}
}

func TestBucketsBounded(t *testing.T) {
	l, c := newLimiter(Share{Rate: 1, Burst: 2})
	for i := range maxClients {
		l.Charge(fmt.Sprint("c", i), 4) // in debt: none can be dropped
	}
	// No room, nothing full: the newcomer shares the overflow bucket.
	l.Charge("new-1", 4)
	if _, ok := l.buckets[overflow]; !ok || len(l.buckets) != maxClients+1 {
		t.Fatalf("%d buckets, overflow %v", len(l.buckets), l.buckets[overflow] != nil)
	}
	if _, ok := l.Admit("new-2"); ok {
		t.Fatal("a client past the bound does not share the overflow bucket")
	}
	// Once they are full again, they are dropped to make room.
	c.advance(10 * time.Second)
	if _, ok := l.Admit("new-3"); !ok {
		t.Fatal("refused after the sweep")
	}
	if len(l.buckets) > 3 {
		t.Fatalf("%d buckets after the sweep", len(l.buckets))
	}
}

func TestTapAndCharge(t *testing.T) {
	var throttled []string
	l := New(Share{Rate: 1, Burst: 1}, func(c string) { throttled = append(throttled, c) })
	tap := l.Tap(func(ctx context.Context) string { return ctx.Value(nameKey{}).(string) })
	ctx := context.WithValue(context.Background(), nameKey{}, "flood")
	actx, err := tap(ctx, &tapInfo)
	if err != nil {
		t.Fatal(err)
	}
	// A 1 MiB message is charged to the client the door admitted: 64 units of debt.
	l.StatsHandler().HandleRPC(actx, &stats.InPayload{Length: 1 << 20})
	_, err = tap(ctx, &tapInfo)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--client-rate") || !strings.Contains(st.Message(), "flood") {
		t.Fatalf("refusal: %v", err)
	}
	var hint *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			hint = r
		}
	}
	if hint == nil || hint.GetRetryDelay().AsDuration() < 900*time.Millisecond {
		t.Fatalf("retry hint %v; want about 1s (debt capped at one burst)", hint)
	}
	if len(throttled) != 1 || throttled[0] != "flood" {
		t.Fatalf("throttled %v", throttled)
	}
	// A call the door did not see is not charged.
	l.StatsHandler().HandleRPC(context.Background(), &stats.InPayload{Length: 1 << 20})
}

type nameKey struct{}

var tapInfo = tap.Info{FullMethodName: "/x/y"}

func TestHTTP(t *testing.T) {
	l, _ := newLimiter(Share{Rate: 2, Burst: 1})
	read := 0
	h := l.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64<<10)
		for {
			n, err := r.Body.Read(b)
			read += n
			if err != nil {
				break
			}
		}
	}), func(r *http.Request) string { return r.Header.Get("X-Client") })
	send := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader(body))
		r.Header.Set("X-Client", "a")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := send(strings.Repeat("x", 32<<10)); w.Code != http.StatusOK {
		t.Fatalf("first: %d", w.Code)
	}
	// 1 - 1 - 2 = -2 units: 1 s to wait.
	w := send("{}")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	var doc struct {
		Code    int
		Message string
		Details []map[string]any
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Code != int(codes.ResourceExhausted) || len(doc.Details) != 1 ||
		doc.Details[0]["@type"] != "type.googleapis.com/google.rpc.RetryInfo" || !strings.Contains(doc.Message, "--client-burst") {
		t.Fatalf("body %s (%v)", w.Body, err)
	}
	if read != 32<<10 {
		t.Fatalf("the refused body was read: %d bytes", read-32<<10)
	}
}

// TestDelayRefusal: refusals of one client are held back one at a time, so however many calls
// it sends at once, the registry refuses at most about one per MaxRefusalDelay; another client's
// refusal is not held behind them, and a call whose connection ends stops waiting.
func TestDelayRefusal(t *testing.T) {
	l := New(Share{Rate: 1, Burst: 1}, nil)
	l.Charge("flood", 1000)
	l.Charge("other", 1000)
	tap := l.Tap(func(ctx context.Context) string { return ctx.Value(nameKey{}).(string) })
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), nameKey{}, "flood"), 10*MaxRefusalDelay)
	defer cancel()
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := tap(ctx, &tapInfo); status.Code(err) == codes.ResourceExhausted && ctx.Err() == nil {
					refused.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	if _, err := tap(context.WithValue(context.Background(), nameKey{}, "other"), &tapInfo); status.Code(err) != codes.ResourceExhausted {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*MaxRefusalDelay {
		t.Errorf("another client's refusal took %s behind the flood's", d)
	}
	wg.Wait()
	if n := refused.Load(); n < 5 || n > 12 {
		t.Errorf("%d refusals in %s from 50 callers; want about one per %s", n, 10*MaxRefusalDelay, MaxRefusalDelay)
	}
}
