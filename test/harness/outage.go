package harness

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EndpointsMonitor watches the imported EndpointSlices of one Service in one cluster and
// adds up, per source cluster, the time during which that source had no Ready endpoint. It
// sees every change the API server reports (a watch, not a poll), so a slice deleted and
// created again counts too.
type EndpointsMonitor struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	sources []string
	slices  map[string]*discoveryv1.EndpointSlice
	since   map[string]time.Time // when a source lost its last Ready endpoint; absent: it has one
	total   map[string]time.Duration
	// causes tells, per source, what began each outage and how long it lasted: the
	// change that took its last Ready endpoint (a deletion, or an update), and by whom.
	causes map[string][]string
	// last is the change being applied, for causes.
	last string
	err  error
}

// MonitorImportedEndpoints starts a monitor of the Service's imported endpoints from the
// given source clusters. Each source should have Ready endpoints when it starts.
func (c *Cluster) MonitorImportedEndpoints(tb testing.TB, namespace, service string, sources ...string) *EndpointsMonitor {
	tb.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		tb.Fatalf("harness: watch client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	list := &discoveryv1.EndpointSliceList{}
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingLabels{"multicluster.kubernetes.io/service-name": service}}
	if err := wc.List(ctx, list, opts...); err != nil {
		cancel()
		tb.Fatalf("harness: list EndpointSlices: %v", err)
	}
	w, err := wc.Watch(ctx, &discoveryv1.EndpointSliceList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
	if err != nil {
		cancel()
		tb.Fatalf("harness: watch EndpointSlices: %v", err)
	}
	m := &EndpointsMonitor{cancel: cancel, done: make(chan struct{}), sources: sources,
		slices: map[string]*discoveryv1.EndpointSlice{}, since: map[string]time.Time{}, total: map[string]time.Duration{},
		causes: map[string][]string{}}
	for i := range list.Items {
		m.slices[list.Items[i].Name] = &list.Items[i]
	}
	m.update(time.Now())
	go m.run(ctx, w)
	tb.Cleanup(m.Stop)
	return m
}

func (m *EndpointsMonitor) run(ctx context.Context, w watch.Interface) {
	defer close(m.done)
	defer w.Stop()
	defer func() {
		if ctx.Err() == nil {
			m.mu.Lock()
			m.err = errors.New("the EndpointSlice watch ended early: the figures after it are not measured")
			m.mu.Unlock()
		}
	}()
	for ev := range w.ResultChan() {
		now := time.Now()
		s, ok := ev.Object.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		m.mu.Lock()
		switch ev.Type {
		case watch.Deleted:
			delete(m.slices, s.Name)
		case watch.Added, watch.Modified:
			m.slices[s.Name] = s
		}
		m.last = fmt.Sprintf("%s %s at %s (resourceVersion %s, managers %s)", ev.Type, s.Name, now.Format("15:04:05.000"), s.ResourceVersion, managers(s))
		m.mu.Unlock()
		m.update(now)
	}
}

// readySources are the source clusters with a Ready endpoint in slices.
func readySources(slices iter.Seq[*discoveryv1.EndpointSlice]) map[string]bool {
	ready := map[string]bool{}
	for s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready[s.Labels["multicluster.kubernetes.io/source-cluster"]] = true
			}
		}
	}
	return ready
}

// ImportedFrom returns the source clusters from which the cluster holds a Ready imported
// endpoint of the Service now.
func (c *Cluster) ImportedFrom(ctx context.Context, namespace, service string) (map[string]bool, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := c.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"multicluster.kubernetes.io/service-name": service}); err != nil {
		return nil, err
	}
	return readySources(func(yield func(*discoveryv1.EndpointSlice) bool) {
		for i := range list.Items {
			if !yield(&list.Items[i]) {
				return
			}
		}
	}), nil
}

func (m *EndpointsMonitor) update(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready := readySources(maps.Values(m.slices))
	for _, src := range m.sources {
		start, out := m.since[src]
		switch {
		case !ready[src] && !out:
			m.since[src] = now
			m.causes[src] = append(m.causes[src], "began with "+m.last)
		case ready[src] && out:
			m.total[src] += now.Sub(start)
			delete(m.since, src)
			if n := len(m.causes[src]); n > 0 {
				m.causes[src][n-1] += fmt.Sprintf("; lasted %s, ended with %s", now.Sub(start).Round(time.Millisecond), m.last)
			}
		}
	}
}

// Outage returns, per source cluster, the time it had no Ready endpoint so far (an outage
// still going on counts up to now).
func (m *EndpointsMonitor) Outage() map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]time.Duration, len(m.sources))
	now := time.Now()
	for _, src := range m.sources {
		out[src] = m.total[src]
		if start, ok := m.since[src]; ok {
			out[src] += now.Sub(start)
		}
	}
	return out
}

// Causes returns, per source cluster, what began each of its outages and how it ended.
func (m *EndpointsMonitor) Causes() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.causes))
	for src, c := range m.causes {
		out[src] = append([]string(nil), c...)
	}
	return out
}

// managers names the field managers of an object and when each last wrote.
func managers(o metav1.Object) string {
	var out []string
	for _, f := range o.GetManagedFields() {
		at := ""
		if f.Time != nil {
			at = " " + f.Time.Format("15:04:05")
		}
		out = append(out, f.Manager+"/"+string(f.Operation)+at)
	}
	return strings.Join(out, ", ")
}

// Err reports a watch that ended before Stop: then Outage is incomplete.
func (m *EndpointsMonitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Stop ends the watch.
func (m *EndpointsMonitor) Stop() {
	m.cancel()
	<-m.done
}
