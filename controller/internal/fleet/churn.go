package fleet

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// flip is one readiness change in flight: sent by src for Service s, awaited in every
// cluster's view.
type flip struct {
	src   *member
	key   types.NamespacedName
	ready bool
	sent  time.Time
	put   time.Duration
	err   error
	seen  []bool
	lat   []time.Duration
	// all is closed when every cluster shows the flip.
	all chan struct{}
}

// flips are the flips in flight, by Service.
type flips struct {
	n    int
	mu   sync.Mutex
	open map[types.NamespacedName][]*flip
}

func newFlips(f *Fleet) *flips {
	return &flips{n: f.cfg.Clusters, open: map[types.NamespacedName][]*flip{}}
}

// observe records, for the Services whose import changed in m's view, the flips m now shows.
func (fl *flips) observe(m *member, keys []types.NamespacedName) {
	now := time.Now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, k := range keys {
		for _, x := range fl.open[k] {
			if x.seen[m.idx] || !m.shows(k, x.src.id, x.ready) {
				continue
			}
			x.seen[m.idx] = true
			x.lat = append(x.lat, now.Sub(x.sent))
			if len(x.lat) == fl.n {
				close(x.all)
			}
		}
	}
}

func (fl *flips) add(x *flip) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.open[x.key] = append(fl.open[x.key], x)
}

func (fl *flips) remove(x *flip) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.open[x.key] = slices.DeleteFunc(fl.open[x.key], func(y *flip) bool { return y == x })
	if len(fl.open[x.key]) == 0 {
		delete(fl.open, x.key)
	}
}

// ChurnReport is what a churn measured.
type ChurnReport struct {
	Flips int `json:"flips"`
	// PutErrors: flips the registry did not accept; Missed: accepted flips some cluster
	// did not show within the wait.
	PutErrors int `json:"put_errors"`
	Missed    int `json:"missed"`
	// All: from the PutExport's start until every cluster's watch shows the flip. Each:
	// the same for one cluster. Put: the PutExport's round trip, the floor of both.
	AllP50  Millis `json:"all_p50_ms"`
	AllP99  Millis `json:"all_p99_ms"`
	AllMax  Millis `json:"all_max_ms"`
	EachP50 Millis `json:"each_p50_ms"`
	EachP99 Millis `json:"each_p99_ms"`
	PutP50  Millis `json:"put_p50_ms"`
	PutP99  Millis `json:"put_p99_ms"`
	// WatchBytes: the bytes of watch messages all clusters received while the churn ran.
	WatchBytes int64 `json:"watch_bytes"`
}

// Millis is a duration reported in milliseconds.
type Millis = float64

// Churn flips the readiness of one endpoint of a random cluster's export of a random
// Service rate times a second for d, each with a PutExport as the export reconciler sends
// it, and waits (at most wait after each flip was sent) until every cluster shows each.
func (f *Fleet) Churn(ctx context.Context, rate float64, d, wait time.Duration) ChurnReport {
	bytes0 := f.codec.received.Load()
	var (
		mu   sync.Mutex
		sent []*flip
		wg   sync.WaitGroup
		busy = map[[2]int]bool{}
	)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.After(d)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
		}
		i, s := f.rng.IntN(len(f.members)), f.rng.IntN(len(f.keys))
		mu.Lock()
		if busy[[2]int{i, s}] {
			mu.Unlock()
			continue // one flip of an export in flight at a time
		}
		busy[[2]int{i, s}] = true
		mu.Unlock()
		m := f.members[i]
		x := &flip{src: m, key: f.keys[s], seen: make([]bool, len(f.members)), all: make(chan struct{})}
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(busy, [2]int{i, s})
				sent = append(sent, x)
				mu.Unlock()
			}()
			// The flip is awaited before it is sent, so no cluster can show it unseen; a
			// cluster that shows the state before the flip does not count.
			x.ready = !m.ready(s)
			f.flips.add(x)
			defer f.flips.remove(x)
			x.sent = time.Now()
			x.err = m.setReady(ctx, s, x.ready)
			x.put = time.Since(x.sent)
			if x.err != nil {
				return
			}
			select {
			case <-x.all:
			case <-time.After(wait):
			case <-ctx.Done():
			}
		})
	}
	wg.Wait()
	r := ChurnReport{Flips: len(sent), WatchBytes: f.codec.received.Load() - bytes0}
	var all, each, put []time.Duration
	for _, x := range sent {
		if x.err != nil {
			r.PutErrors++
			continue
		}
		put = append(put, x.put)
		f.flips.mu.Lock()
		lat := slices.Clone(x.lat)
		f.flips.mu.Unlock()
		each = append(each, lat...)
		if len(lat) < len(f.members) {
			r.Missed++
			continue
		}
		all = append(all, slices.Max(lat))
	}
	r.AllP50, r.AllP99, r.AllMax = quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1)
	r.EachP50, r.EachP99 = quantile(each, 0.5), quantile(each, 0.99)
	r.PutP50, r.PutP99 = quantile(put, 0.5), quantile(put, 0.99)
	return r
}

// quantile is the q-quantile of ds in milliseconds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) Millis {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i].Microseconds()) / 1000
}
