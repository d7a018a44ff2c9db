// Package httpapi serves a Discovery over HTTP: GET /pools and GET /routers (JSON documents
// of package api), /healthz, /readyz (the EndpointSlice cache has synced) and /metrics.
package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/api"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
)

// Source is what the handlers read: a *discovery.Discovery.
type Source interface {
	Snapshot() discovery.Snapshot
	Synced() bool
}

// Metrics are the discovery's Prometheus metrics; docs/configuration.md lists them.
type Metrics struct {
	pools      prometheus.Gauge
	routers    prometheus.Gauge
	slices     prometheus.Gauge
	builds     prometheus.Counter
	buildTime  prometheus.Histogram
	requests   *prometheus.CounterVec
	registerer prometheus.Gatherer
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		pools:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "gds_discovery_pools", Help: "Pools in the current snapshot."}),
		routers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gds_discovery_routers", Help: "Ready router replicas in the current snapshot."}),
		slices:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gds_discovery_endpointslices", Help: "Imported EndpointSlices read for the current snapshot."}),
		builds:  prometheus.NewCounter(prometheus.CounterOpts{Name: "gds_discovery_snapshot_builds_total", Help: "Snapshots built, one per batch of EndpointSlice changes."}),
		buildTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gds_discovery_snapshot_build_seconds", Help: "Time to build a snapshot from the EndpointSlice cache.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		requests:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gds_http_requests_total", Help: "HTTP requests, by path and status code."}, []string{"path", "code"}),
		registerer: reg,
	}
	reg.MustRegister(m.pools, m.routers, m.slices, m.builds, m.buildTime, m.requests)
	return m
}

// Observer returns the discovery observer that feeds the metrics.
func (m *Metrics) Observer() discovery.Observer {
	return discovery.Observer{Built: func(d time.Duration, slices int, s discovery.Snapshot) {
		m.builds.Inc()
		m.buildTime.Observe(d.Seconds())
		m.slices.Set(float64(slices))
		m.pools.Set(float64(len(s.Pools)))
		m.routers.Set(float64(len(s.Routers)))
	}}
}

// Handler serves the discovery's HTTP API.
func Handler(src Source, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	count := func(path string, code int) {
		if m != nil {
			m.requests.WithLabelValues(path, fmt.Sprint(code)).Inc()
		}
	}
	// Each document is encoded once per snapshot, not once per request: many consumers
	// poll, and a large clusterset's /pools is megabytes.
	pools := &encoded{build: func(s discovery.Snapshot) any { return api.PoolsResponse{APIVersion: api.APIVersion, Pools: s.Pools} }}
	routers := &encoded{build: func(s discovery.Snapshot) any {
		return api.RoutersResponse{APIVersion: api.APIVersion, Routers: s.Routers}
	}}
	serve := func(path string, e *encoded) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			b, err := e.get(src.Snapshot())
			if err != nil {
				count(path, http.StatusInternalServerError)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			count(path, http.StatusOK)
			_, _ = w.Write(b)
		}
	}
	mux.HandleFunc("GET /pools", serve("/pools", pools))
	mux.HandleFunc("GET /routers", serve("/routers", routers))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !src.Synced() {
			http.Error(w, "EndpointSlice cache not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if m != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.registerer, promhttp.HandlerOpts{}))
	}
	return mux
}

// encoded caches one document's JSON for the latest snapshot generation.
type encoded struct {
	build func(discovery.Snapshot) any
	mu    sync.Mutex
	gen   uint64
	valid bool
	body  []byte
}

func (e *encoded) get(s discovery.Snapshot) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.valid && e.gen == s.Generation {
		return e.body, nil
	}
	b, err := json.Marshal(e.build(s))
	if err != nil {
		return nil, err
	}
	e.body, e.gen, e.valid = append(b, '\n'), s.Generation, true
	return e.body, nil
}
