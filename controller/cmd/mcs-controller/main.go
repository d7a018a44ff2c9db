// Command mcs-controller runs in every member cluster of a clusterset: it keeps the
// cluster registered with mcs-registry and sends the cluster's ServiceExports and their
// endpoints to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/apicheck"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/cleanup"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/exporter"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/identity"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/importer"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/version"
)

type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Type() string   { return "strings" }
func (s *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

type options struct {
	registryURLs        stringList
	registryCAFile      string
	registryCertFile    string
	registryKeyFile     string
	allowInsecureHTTP   bool
	clustersetID        string
	clusterID           string
	region              string
	watchNamespaces     stringList
	leaseDuration       time.Duration
	renewInterval       time.Duration
	endpointBatchPeriod time.Duration
	leaderElect         bool
	leaderElectionNS    string
	leaderElectionID    string
	leaderLeaseDuration time.Duration
	leaderRenewDeadline time.Duration
	leaderRetryPeriod   time.Duration
	metricsAddr         string
	probeAddr           string
	logLevel            string
	logFormat           string
	failbackMin         time.Duration
	failbackMax         time.Duration
	registryCallTimeout time.Duration
	createNamespaces    bool
	adoptUnmanaged      bool
	importDeletionDelay time.Duration
	importWorkers       int
	verifyEvery         int
	showVersion         bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "cleanup" {
		os.Exit(runCleanup(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

// parseFlags parses args; done means the process exits with code (--help: 0 after the flags
// are printed on stdout; a usage error: 2).
func parseFlags(fs *pflag.FlagSet, about string, args []string) (done bool, code int) {
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return false, 0
	case errors.Is(err, pflag.ErrHelp):
		fmt.Printf("%s\n\nUsage:\n  %s [flags]\n\nFlags:\n%s", about, fs.Name(), fs.FlagUsages())
		return true, 0
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for the flags.\n", fs.Name(), err, fs.Name())
		return true, 2
	}
}

// newLogger is the process's logger; an unknown format or level is a usage error.
func newLogger(format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)).With("version", version.Version), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)).With("version", version.Version), nil
	}
	return nil, fmt.Errorf("--log-format: %q must be json or text", format)
}

// run returns the exit code: 0, 1 for a runtime error, 2 for a usage error (a flag or its
// value).
func run(args []string) int {
	var o options
	fs := pflag.NewFlagSet("mcs-controller", pflag.ContinueOnError)
	fs.AddGoFlagSet(flag.CommandLine) // controller-runtime's --kubeconfig
	fs.Var(&o.registryURLs, "registry-url", "gRPC URL of the registry, https:// or http://; repeat (or separate with commas) for failover, in order.")
	fs.StringVar(&o.registryCAFile, "registry-tls-ca-file", "", "PEM bundle of the CAs that sign the registry certificates; empty: the system roots.")
	fs.StringVar(&o.registryCertFile, "registry-tls-cert-file", "", "PEM client certificate presented to the registry (when it requires one); reloaded when the file changes.")
	fs.StringVar(&o.registryKeyFile, "registry-tls-key-file", "", "PEM private key of --registry-tls-cert-file.")
	fs.BoolVar(&o.allowInsecureHTTP, "registry-allow-insecure-http", false, "Permit http:// registry URLs (plaintext).")
	fs.StringVar(&o.clustersetID, "clusterset-id", "", "The clusterset; empty: the ClusterProperty clusterset.k8s.io.")
	fs.StringVar(&o.clusterID, "cluster-id", "", "This cluster's id; empty: the ClusterProperty cluster.clusterset.k8s.io.")
	fs.StringVar(&o.region, "region", "", "This cluster's region; empty: the most common topology.kubernetes.io/region node label.")
	fs.Var(&o.watchNamespaces, "watch-namespaces", "Namespaces whose ServiceExports are exported, comma-separated; empty: all.")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 30*time.Second, "The cluster's lease in the registry (5s to 1h).")
	fs.DurationVar(&o.renewInterval, "renew-interval", 10*time.Second, "How often the leader renews the lease; at most a third of --lease-duration.")
	fs.DurationVar(&o.endpointBatchPeriod, "endpoint-batch-period", 500*time.Millisecond, "EndpointSlice changes of one Service within this period are sent in one write.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader among the replicas; only the leader writes to the registry.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease; empty: $POD_NAMESPACE, else mcs-system.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", defaultLeaderElectionID, "Name of the leader-election Lease.")
	fs.DurationVar(&o.leaderLeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader holds the Lease without renewing it.")
	fs.DurationVar(&o.leaderRenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader retries renewing before it steps down.")
	fs.DurationVar(&o.leaderRetryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates try to take the Lease.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of /metrics; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.DurationVar(&o.failbackMin, "registry-failback-min-interval", 15*time.Second, "After a failover, first wait before probing the earlier registry URLs again.")
	fs.DurationVar(&o.failbackMax, "registry-failback-max-interval", 2*time.Minute, "Longest wait between failback probes.")
	fs.DurationVar(&o.registryCallTimeout, "registry-call-timeout", 10*time.Second, "Timeout of one registry call on one URL before the next URL is tried.")
	fs.BoolVar(&o.createNamespaces, "create-namespaces", false, "Create the namespace of an import when it does not exist, instead of holding the import until it is created.")
	fs.BoolVar(&o.adoptUnmanaged, "adopt-unmanaged-imports", false, "Take over ServiceImports with an import's name that this controller did not create.")
	fs.DurationVar(&o.importDeletionDelay, "import-deletion-delay", 0, "Keep imported objects this long after their import disappears from the registry; 0 deletes at once.")
	fs.IntVar(&o.importWorkers, "import-workers", 8, "ServiceImports reconciled at once (1 to 64).")
	fs.IntVar(&o.verifyEvery, "verify-exports-every", 6, "Every this many lease renewals, compare the registry's copy of the cluster's exports with the cluster's and send them again if they differ; 0 never.")
	fs.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&o.logFormat, "log-format", "json", "Log format: json or text.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	if done, code := parseFlags(fs, "mcs-controller keeps this cluster registered with mcs-registry, sends its exports and writes its imports.\n'mcs-controller cleanup --help': the uninstall cleanup.", args); done {
		return code
	}
	if o.showVersion {
		fmt.Println("mcs-controller", version.String())
		return 0
	}
	log, err := newLogger(o.logFormat, o.logLevel)
	if err == nil {
		_, err = o.validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller: %v\n", err)
		return 2
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := runController(ctrl.SetupSignalHandler(), o, log); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller: %v\n", err)
		return 1
	}
	return 0
}

// runCleanup is "mcs-controller cleanup": for an uninstall, it removes what the controller
// wrote into the cluster once the controller has stopped.
func runCleanup(args []string) int {
	fs := pflag.NewFlagSet("mcs-controller cleanup", pflag.ContinueOnError)
	var (
		namespaces          stringList
		kubeconfig          string
		leNS, leID          string
		wait                time.Duration
		logLevel, logFormat string
	)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file; empty: $KUBECONFIG, else the in-cluster configuration.")
	fs.Var(&namespaces, "watch-namespaces", "Namespaces to clean, comma-separated; empty: all.")
	fs.StringVar(&leNS, "leader-election-namespace", "", "Namespace of the controller's leader-election Lease; empty: $POD_NAMESPACE, else mcs-system.")
	fs.StringVar(&leID, "leader-election-id", defaultLeaderElectionID, "Name of the controller's leader-election Lease; empty: do not wait for it.")
	fs.DurationVar(&wait, "wait", 2*time.Minute, "How long to wait for the controller to release its leader-election Lease before giving up.")
	fs.StringVar(&logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&logFormat, "log-format", "json", "Log format: json or text.")
	if done, code := parseFlags(fs, "mcs-controller cleanup removes what the controller wrote into the cluster, for an uninstall, once the controller has stopped.", args); done {
		return code
	}
	log, err := newLogger(logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller cleanup: %v\n", err)
		return 2
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if kubeconfig != "" {
		// controller-runtime's config loader reads its own --kubeconfig flag.
		if err := flag.CommandLine.Set("kubeconfig", kubeconfig); err != nil {
			fmt.Fprintf(os.Stderr, "mcs-controller cleanup: --kubeconfig: %v\n", err)
			return 2
		}
	}
	if err := cleanupCluster(ctrl.SetupSignalHandler(), []string(namespaces), leaderNamespace(leNS), leID, wait, log); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller cleanup: %v\n", err)
		return 1
	}
	return 0
}

func cleanupCluster(ctx context.Context, namespaces []string, leNS, leID string, wait time.Duration, log *slog.Logger) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	opts := cleanup.Options{Namespaces: namespaces, Wait: wait, Log: log}
	if leID != "" {
		opts.LeaderLease = client.ObjectKey{Namespace: leNS, Name: leID}
	}
	res, err := cleanup.Run(ctx, c, opts)
	if err != nil {
		return fmt.Errorf("%w (so far: %s)", err, res)
	}
	log.Info("cleanup done: "+res.String(), "finalizers_removed", res.FinalizersRemoved, "exports_deleted", res.ExportsDeleted,
		"imports_deleted", res.ImportsDeleted, "services_deleted", res.ServicesDeleted, "endpointslices_deleted", res.SlicesDeleted)
	return nil
}

// leaderNamespace is the namespace of the leader-election Lease: the flag, else the pod's.
func leaderNamespace(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "mcs-system"
}

// newScheme holds the built-in types and the MCS v1beta1 types.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1beta1.Install} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

const defaultLeaderElectionID = "mcs-controller.multicluster.dynamo.nvidia.com"

func (o options) validate() ([]registryclient.Target, error) {
	targets, err := registryclient.ParseURLs(o.registryURLs, o.allowInsecureHTTP)
	if err != nil {
		return nil, err
	}
	if o.leaseDuration < 5*time.Second || o.leaseDuration > time.Hour {
		return nil, fmt.Errorf("--lease-duration %s: must be between 5s and 1h", o.leaseDuration)
	}
	if o.renewInterval <= 0 || o.renewInterval*3 > o.leaseDuration {
		return nil, fmt.Errorf("--renew-interval %s: must be positive and at most a third of --lease-duration (%s)", o.renewInterval, o.leaseDuration)
	}
	if o.importWorkers < 1 || o.importWorkers > 64 {
		return nil, fmt.Errorf("--import-workers %d: must be between 1 and 64", o.importWorkers)
	}
	return targets, nil
}

func runController(ctx context.Context, o options, log *slog.Logger) error {
	targets, err := o.validate()
	if err != nil {
		return err
	}
	tlsFiles, err := registryclient.LoadTLSFiles(o.registryCAFile, o.registryCertFile, o.registryKeyFile, log)
	if err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	direct, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	if err := apicheck.Check(disc, apicheck.MCS); err != nil {
		return err
	}
	id, err := identity.Resolve(ctx, direct, o.clustersetID, o.clusterID, o.region)
	if err != nil {
		return err
	}
	if id.Region == "" {
		log.Warn("no region: --region is not set and no Node has the label " + identity.RegionLabel)
	}
	log.Info("cluster identity", "clusterset", id.Clusterset, "cluster", id.ClusterID, "region", id.Region,
		"clusterset_from", id.Sources["clusterset"], "cluster_from", id.Sources["cluster"], "region_from", id.Sources["region"])

	leNS := leaderNamespace(o.leaderElectionNS)
	cacheOpts := cache.Options{}
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(restCfg, manager.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       leNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaderLeaseDuration,
		RenewDeadline:                 &o.leaderRenewDeadline,
		RetryPeriod:                   &o.leaderRetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	m := newMetrics(crmetrics.Registry)
	if err := mgr.Add(tlsFiles); err != nil {
		return err
	}
	pool, err := registryclient.NewPool(registryclient.PoolOptions{
		Targets: targets, TLS: tlsFiles.Config, Logger: log, Metrics: m.hooks(), CallTimeout: o.registryCallTimeout,
	})
	if err != nil {
		return err
	}
	defer pool.Close()

	exp := &exporter.Reconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("mcs-controller"), Registry: pool,
		Clusterset: id.Clusterset, ClusterID: id.ClusterID, BatchPeriod: o.endpointBatchPeriod, Log: log,
		Metrics: exporter.Metrics{ExportWrite: m.exportWrite},
	}
	session := &registryclient.Session{
		Pool: pool, Clusterset: id.Clusterset, ClusterID: id.ClusterID, Region: id.Region,
		LeaseDuration: o.leaseDuration, RenewInterval: o.renewInterval, RetryInterval: 2 * time.Second,
		OnRegistered: exp.SyncAll, Log: log, Metrics: m.hooks(), VerifyEvery: o.verifyEvery,
	}
	// After the registry's epoch changes, other clusters' endpoints are held until each
	// cluster sends its exports again, at most one lease: a cluster gone longer has left.
	watch := &registryclient.ImportWatch{Pool: pool, Clusterset: id.Clusterset, IncludeEndpoints: true, Log: log,
		RefillHold: o.leaseDuration, OnHold: m.clustersHeld}
	imp := &importer.Reconciler{
		Client: mgr.GetClient(), Imports: watch, WatchNamespaces: o.watchNamespaces, CreateNamespaces: o.createNamespaces,
		AdoptUnmanaged: o.adoptUnmanaged, DeletionDelay: o.importDeletionDelay, Workers: o.importWorkers, Log: log,
		Metrics: importer.Metrics{Write: m.importWrite, Held: m.importsHeld},
	}
	exp.Session, exp.Imports = session, watch
	session.OnStateChange = func() { go exp.Trigger(ctx, nil) }
	watch.OnChange = []func([]registryclient.ServiceKey){
		func(keys []registryclient.ServiceKey) { exp.Trigger(ctx, keys) },
		func(keys []registryclient.ServiceKey) { imp.Trigger(ctx, keys) },
	}
	if err := exp.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := imp.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&exporter.LabelReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	// The session, the import watch and the failback prober run on the leader only.
	for _, r := range []func(context.Context) error{
		func(ctx context.Context) error {
			// Exports are read from the cache; wait for it before the first registration.
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return errors.New("cache did not sync")
			}
			return session.Run(ctx)
		},
		watch.Run,
		imp.Resync,
		func(ctx context.Context) error { pool.RunFailback(ctx, o.failbackMin, o.failbackMax); return nil },
	} {
		if err := mgr.Add(manager.RunnableFunc(r)); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("mcs-controller starting", "registry_urls", o.registryURLs.String(), "watch_namespaces", o.watchNamespaces.String(),
		"leader_election", o.leaderElect, "leader_election_namespace", leNS)
	return mgr.Start(ctx)
}

// metrics of the controller, registered on controller-runtime's registry.
type metrics struct {
	connection *prometheus.GaugeVec
	active     *prometheus.GaugeVec
	failovers  prometheus.Counter
	heartbeats *prometheus.CounterVec
	registers  *prometheus.CounterVec
	writes     *prometheus.CounterVec
	imports    *prometheus.CounterVec
	held       *prometheus.GaugeVec
	heldCl     prometheus.Gauge
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
			Help: "Imports not applied as the registry has them, by reason: namespace_missing (held until the namespace exists), unmanaged (a ServiceImport of another owner has the name) or registry_restart (endpoints of clusters that have not yet sent their exports to a restarted registry are kept)."}, []string{"reason"}),
		heldCl: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcs_controller_registry_restart_held_clusters",
			Help: "Source clusters whose imported endpoints are kept after the registry's epoch changed, until each sends its exports again (at most --lease-duration)."}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcs_controller_build_info",
		Help: "Always 1; the labels say what the binary was built from."}, []string{"version", "commit", "build_date", "go_version"})
	buildInfo.WithLabelValues(version.Version, version.Commit, version.BuildDate, goruntime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	reg.MustRegister(m.connection, m.active, m.failovers, m.heartbeats, m.registers, m.writes, m.imports, m.held, m.heldCl)
	return m
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
