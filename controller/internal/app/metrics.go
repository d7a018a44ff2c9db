package app

import (
	goruntime "runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
)

// metrics of the controller, registered on controller-runtime's registry.
type metrics struct {
	connection  *prometheus.GaugeVec
	active      *prometheus.GaugeVec
	failovers   prometheus.Counter
	heartbeats  *prometheus.CounterVec
	registers   *prometheus.CounterVec
	writes      *prometheus.CounterVec
	imports     *prometheus.CounterVec
	held        *prometheus.GaugeVec
	heldCl      prometheus.Gauge
	refused     *prometheus.GaugeVec
	propagation *prometheus.HistogramVec
	tier        *prometheus.GaugeVec
	tierChanges *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		connection: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_registry_connection_up",
			Help: "1 when the registry URL answered its last call or probe, 0 when it did not."}, []string{"url"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_registry_active",
			Help: "1 for the registry URL calls go to now, 0 for the others."}, []string{"url"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcs_controller_registry_failovers_total",
			Help: "Moves from one registry URL to another, failbacks included."}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcs_controller_heartbeats_total",
			Help: "Lease renewals, by result (success or failure)."}, []string{"result"}),
		registers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcs_controller_registrations_total",
			Help: "Cluster registrations, by result (success or failure)."}, []string{"result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcs_controller_export_writes_total",
			Help: "Export writes to the registry, by operation (put, delete, sync) and result (success or failure)."}, []string{"op", "result"}),
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcs_controller_import_writes_total",
			Help: "Writes of imported objects to the API server, by kind (ServiceImport, Service, EndpointSlice, Namespace) and op (create, update, delete)."}, []string{"kind", "op"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_imports_held",
			Help: "Imports not applied as the registry has them, by reason: namespace_missing (held until the namespace exists), unmanaged (a ServiceImport of another owner has the name), registry_restart (endpoints of clusters that have not yet sent their exports to a restarted registry are kept) or deletion_delay (endpoints of clusters that left the import are kept for --import-deletion-delay)."}, []string{"reason"}),
		heldCl: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcs_controller_registry_restart_held_clusters",
			Help: "Source clusters whose imported endpoints are kept after the registry's epoch changed, until each sends its exports again (at most --lease-duration)."}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_imports_refused",
			Help: "Imports in which the API server refuses imported objects of a source cluster (the ServiceImport's EndpointsRefused condition names them), by source cluster."}, []string{"source_cluster"}),
	}
	m.tier = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_import_locality_tier",
		Help: "1 for the locality tier (cluster, region or any) that takes an imported Service's traffic in this cluster, by namespace and service; the other tiers have no series."}, []string{"namespace", "service", "tier"})
	m.tierChanges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcs_controller_import_locality_changes_total",
		Help: "Changes of an imported Service's active locality tier in this cluster, by namespace and service."}, []string{"namespace", "service"})
	m.propagation = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcs_controller_propagation_seconds",
		Help:    "With --canary-interval: how long a change of another cluster's canary export took to be written into this cluster, by source cluster, measured against the registry's clock (no cluster clock is trusted).",
		Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60}}, []string{"source_cluster"})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_build_info",
		Help: "Always 1; the labels say what the binary was built from."}, []string{"version", "commit", "build_date", "go_version"})
	buildInfo.WithLabelValues(buildinfo.Version, buildinfo.Commit, buildinfo.BuildDate, goruntime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	reg.MustRegister(m.connection, m.active, m.failovers, m.heartbeats, m.registers, m.writes, m.imports, m.held, m.heldCl, m.refused, m.propagation, m.tier, m.tierChanges)
	return m
}

// clientCertificateExpiry is the gauge of when the client certificate the controller
// presents to the registry expires, read at each scrape from the files as they are then,
// so a renewal (or one that did not happen) shows before any new connection needs it.
func clientCertificateExpiry(notAfter func() (time.Time, bool)) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcs_controller_registry_client_certificate_expiry_timestamp_seconds",
		Help: "When the client certificate in --registry-tls-cert-file expires (its NotAfter), in Unix seconds; absent without one."},
		func() float64 {
			t, _ := notAfter()
			return float64(t.Unix())
		})
}

func result(ok bool) string {
	if ok {
		return "success"
	}
	return "failure"
}

func (m *metrics) importWrite(kind, op string) { m.imports.WithLabelValues(kind, op).Inc() }

func (m *metrics) importsHeld(reason string, n int) { m.held.WithLabelValues(reason).Set(float64(n)) }

func (m *metrics) clustersHeld(n int) { m.heldCl.Set(float64(n)) }

func (m *metrics) propagated(source string, d time.Duration) {
	m.propagation.WithLabelValues(source).Observe(d.Seconds())
}

// importsRefused sets a source cluster's count; a cluster no import refuses any more leaves
// the metric, so a clusterset's departed clusters do not stay as series.
func (m *metrics) importsRefused(cluster string, n int) {
	if n == 0 {
		m.refused.DeleteLabelValues(cluster)
		return
	}
	m.refused.WithLabelValues(cluster).Set(float64(n))
}

// localityTier sets an import's active tier; a change counts once.
func (m *metrics) localityTier(namespace, service, tier string, changed bool) {
	m.tier.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "service": service})
	m.tier.WithLabelValues(namespace, service, tier).Set(1)
	if changed {
		m.tierChanges.WithLabelValues(namespace, service).Inc()
	}
}

// localityGone drops a removed import's series, so departed Services do not stay.
func (m *metrics) localityGone(namespace, service string) {
	m.tier.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "service": service})
	m.tierChanges.DeleteLabelValues(namespace, service)
}

func (m *metrics) exportWrite(op string, ok bool) { m.writes.WithLabelValues(op, result(ok)).Inc() }

func (m *metrics) hooks() registryclient.Metrics {
	return registryclient.Metrics{
		ConnectionState: func(url string, up bool) {
			v := 0.0
			if up {
				v = 1
			}
			m.connection.WithLabelValues(url).Set(v)
		},
		Active: func(url string) {
			m.active.Reset()
			m.active.WithLabelValues(url).Set(1)
		},
		Failover:  func(string, string) { m.failovers.Inc() },
		Heartbeat: func(ok bool) { m.heartbeats.WithLabelValues(result(ok)).Inc() },
		Register:  func(ok bool) { m.registers.WithLabelValues(result(ok)).Inc() },
	}
}
