package app

import (
	"crypto/x509"
	"runtime"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/tlsfiles"
)

// metrics are the registry's Prometheus metrics, registered on the process's own registry.
// docs/configuration.md lists each one.
type metrics struct {
	grpc          *grpcprom.ServerMetrics
	watches       prometheus.Gauge
	watchMessages *prometheus.CounterVec
	recomputes    *prometheus.CounterVec
	capacityUnits *prometheus.CounterVec
	denials       *prometheus.CounterVec
	badItems      prometheus.Counter
	refusals      *prometheus.CounterVec
	tlsReloads    *prometheus.CounterVec
	tlsNotAfter   prometheus.Gauge
	droppedWrites *prometheus.CounterVec
	sweptChunks   prometheus.Counter
	// storeWaiting and storeAbandoned: requests to DynamoDB waiting for a slot, and never sent.
	storeWaiting   prometheus.Gauge
	storeAbandoned prometheus.Counter
	storeUp        prometheus.Gauge
	throttled      *prometheus.CounterVec
	// throttledMu guards throttledClients, the clients throttled has a series for.
	throttledMu      sync.Mutex
	throttledClients map[string]bool
}

// maxThrottledSeries bounds the series of mcs_registry_client_throttled_total: clients
// refused after that many others are counted as "other", so clients with ever new
// addresses cannot grow the registry's metrics.
const maxThrottledSeries = 1000

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		// The standard gRPC server metrics (grpc_server_started_total, _handled_total,
		// _msg_received_total, _msg_sent_total, _handling_seconds), as every gRPC
		// dashboard reads them; REST calls reach the service through the same interceptors.
		grpc: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0005, 2, 14)))),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcs_registry_watches",
			Help: "Open WatchImports streams.",
		}),
		watchMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_registry_watch_messages_total",
			Help: "Messages sent on WatchImports streams, by kind (snapshot or delta).",
		}, []string{"kind"}),
		recomputes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_registry_import_recomputes_total",
			Help: "ServiceImport merges, by whether the result changed (true or false).",
		}, []string{"changed"}),
		capacityUnits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_registry_dynamodb_capacity_units_total",
			Help: "DynamoDB capacity units consumed by the dynamodb store, by operation.",
		}, []string{"operation"}),
	}
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_registry_permission_denied_total",
		Help: "Calls refused because the client's identity may not make them (--client-ca-file), by method.",
	}, []string{"method"})
	m.storeWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcs_registry_dynamodb_requests_waiting",
		Help: "Requests to DynamoDB waiting for one of --dynamodb-max-requests.",
	})
	m.storeAbandoned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcs_registry_dynamodb_requests_abandoned_total",
		Help: "Requests to DynamoDB never sent because their caller gave up while they waited for one of --dynamodb-max-requests.",
	})
	m.badItems = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcs_registry_store_bad_items_total",
		Help: "Stored items skipped because they cannot be decoded (dynamodb store); each is logged with its key.",
	})
	m.droppedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_registry_store_dropped_writes_total",
		Help: "Store writes that failed where no request waits for them, by op: heartbeat and heartbeat_cleanup (replication heartbeats), chunk_delete (an endpoint chunk of a replaced export generation, left in the table), chunk_sweep (an orphaned chunk a reader failed to remove), cluster_keys (a cluster's export keys, written again after a read found them out of date).",
	}, []string{"op"})
	m.sweptChunks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcs_registry_store_swept_chunks_total",
		Help: "Orphaned endpoint chunks (of an export generation its item no longer names, older than 10 minutes) that a read of the export found and removed (dynamodb store).",
	})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_registry_limit_refusals_total",
		Help: "Requests refused, and watches closed, because they reached a limit, by limit (docs/configuration.md).",
	}, []string{"limit"})
	m.tlsReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_registry_tls_reloads_total",
		Help: "Reloads of the TLS files (--tls-cert-file, --tls-key-file, --client-ca-file) after they changed, by result (success, or failure: the previous files stay in use).",
	}, []string{"result"})
	m.tlsNotAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcs_registry_tls_certificate_expiry_timestamp_seconds",
		Help: "When the serving certificate in use expires (its NotAfter), in Unix seconds; absent without TLS.",
	})
	m.storeUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcs_registry_store_up",
		Help: "1 when the store answered its last check (every 5 s, as gRPC health and /readyz), 0 when it did not.",
	})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_registry_client_throttled_total",
		Help: "Requests refused at the door because their client was over its share (--client-rate, --client-burst), by client: its certificate identity, or \"address <ip>\" without client certificates (\"other\" past 1000 clients).",
	}, []string{"client"})
	m.throttledClients = map[string]bool{}
	reg.MustRegister(m.storeUp)
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mcs_registry_build_info",
		Help: "Always 1; the labels say what the binary was built from.",
	}, []string{"version", "commit", "build_date", "go_version"})
	buildInfo.WithLabelValues(buildinfo.Version, buildinfo.Commit, buildinfo.BuildDate, runtime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	reg.MustRegister(m.grpc, m.watches, m.watchMessages, m.recomputes, m.capacityUnits, m.denials, m.badItems, m.refusals, m.tlsReloads, m.throttled, m.droppedWrites, m.sweptChunks, m.storeWaiting, m.storeAbandoned)
	return m
}

// tlsObserver reports the TLS files' reloads and the serving certificate's expiry; the
// expiry gauge is registered only when TLS is served.
func (m *metrics) tlsObserver(reg prometheus.Registerer) tlsfiles.Observer {
	reg.MustRegister(m.tlsNotAfter)
	return tlsfiles.Observer{
		Reloaded: func(ok bool) {
			result := "success"
			if !ok {
				result = "failure"
			}
			m.tlsReloads.WithLabelValues(result).Inc()
		},
		Certificate: func(c *x509.Certificate) { m.tlsNotAfter.Set(float64(c.NotAfter.Unix())) },
	}
}

func (m *metrics) denied(method string) { m.denials.WithLabelValues(method).Inc() }

func (m *metrics) refused(limit string) { m.refusals.WithLabelValues(limit).Inc() }

// clientThrottled counts a request refused at the door, in the limit refusals and by client.
func (m *metrics) clientThrottled(client string) {
	m.refused(LimitClientRate)
	m.throttledMu.Lock()
	if !m.throttledClients[client] {
		if len(m.throttledClients) >= maxThrottledSeries {
			client = "other"
		} else {
			m.throttledClients[client] = true
		}
	}
	m.throttledMu.Unlock()
	m.throttled.WithLabelValues(client).Inc()
}

// LimitClientRate names --client-rate in mcs_registry_limit_refusals_total.
const LimitClientRate = "client_rate"

func (m *metrics) capacity(operation string, units float64) {
	m.capacityUnits.WithLabelValues(operation).Add(units)
}

func (m *metrics) observer() imports.Observer {
	changed, unchanged := m.recomputes.WithLabelValues("true"), m.recomputes.WithLabelValues("false")
	snap, delta := m.watchMessages.WithLabelValues("snapshot"), m.watchMessages.WithLabelValues("delta")
	return imports.Observer{
		Recomputed: func(c bool) {
			if c {
				changed.Inc()
			} else {
				unchanged.Inc()
			}
		},
		Snapshot: snap.Inc,
		Delta:    delta.Inc,
	}
}

// interceptors count every call in the standard gRPC metrics and the open watches.
func (m *metrics) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	stream := m.grpc.StreamServerInterceptor()
	return m.grpc.UnaryServerInterceptor(), func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		m.watches.Inc()
		defer m.watches.Dec()
		return stream(srv, ss, info, handler)
	}
}

// inventory reports each clusterset's clusters, exports and imports at scrape time.
type inventory struct {
	cache                                   *imports.Cache
	clusters, exports, imports, conflicting *prometheus.Desc
}

func newInventory(c *imports.Cache) *inventory {
	return &inventory{
		cache: c,
		clusters: prometheus.NewDesc("mcs_registry_clusters",
			"Registered clusters, by clusterset and lease state (active, held_replication or expired), in the clustersets this replica serves.", []string{"clusterset", "state"}, nil),
		exports: prometheus.NewDesc("mcs_registry_exports",
			"Exports, by clusterset, in the clustersets this replica serves.", []string{"clusterset"}, nil),
		imports: prometheus.NewDesc("mcs_registry_imports",
			"ServiceImports, by clusterset, in the clustersets this replica serves.", []string{"clusterset"}, nil),
		conflicting: prometheus.NewDesc("mcs_registry_imports_in_conflict",
			"ServiceImports whose exports disagree (a Conflict condition on their ServiceExports), by clusterset.", []string{"clusterset"}, nil),
	}
}

func (i *inventory) Describe(ch chan<- *prometheus.Desc) {
	ch <- i.clusters
	ch <- i.exports
	ch <- i.imports
	ch <- i.conflicting
}

func (i *inventory) Collect(ch chan<- prometheus.Metric) {
	for _, inv := range i.cache.Inventory() {
		ch <- prometheus.MustNewConstMetric(i.clusters, prometheus.GaugeValue, float64(inv.ActiveClusters), inv.Clusterset, "active")
		ch <- prometheus.MustNewConstMetric(i.clusters, prometheus.GaugeValue, float64(inv.HeldClusters), inv.Clusterset, "held_replication")
		ch <- prometheus.MustNewConstMetric(i.clusters, prometheus.GaugeValue, float64(inv.ExpiredClusters), inv.Clusterset, "expired")
		ch <- prometheus.MustNewConstMetric(i.exports, prometheus.GaugeValue, float64(inv.Exports), inv.Clusterset)
		ch <- prometheus.MustNewConstMetric(i.imports, prometheus.GaugeValue, float64(inv.Imports), inv.Clusterset)
		ch <- prometheus.MustNewConstMetric(i.conflicting, prometheus.GaugeValue, float64(inv.Conflicts), inv.Clusterset)
	}
}

// replicationLag reports the DynamoDB store's measure of each other region's replication
// lag (its heartbeats).
type replicationLag struct {
	store lagMeasure
	desc  *prometheus.Desc
}

// lagMeasure is the store's replication measure (the DynamoDB store's heartbeats).
type lagMeasure interface {
	ReplicationLag() map[string]time.Duration
}

func newReplicationLag(st lagMeasure) *replicationLag {
	return &replicationLag{store: st, desc: prometheus.NewDesc("mcs_registry_replication_lag_seconds",
		"How far behind this replica the writes of another region arrive, by source region, measured from replication heartbeats with this replica's clock only: half the heartbeats' round trip, plus the silence since the region's last heartbeat beyond the heartbeat interval.",
		[]string{"source_region"}, nil)}
}

func (r *replicationLag) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *replicationLag) Collect(ch chan<- prometheus.Metric) {
	for region, lag := range r.store.ReplicationLag() {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, lag.Seconds(), region)
	}
}
