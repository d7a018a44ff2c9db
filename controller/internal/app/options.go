package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
)

// Options are mcs-controller's flags; AddFlags defines them and Validate checks them.
type Options struct {
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
	metricsSecure       bool
	metricsCertDir      string
	probeAddr           string
	Logging             command.Logging
	failbackMin         time.Duration
	failbackMax         time.Duration
	healthInterval      time.Duration
	canaryInterval      time.Duration
	healthTimeout       time.Duration
	registryCallTimeout time.Duration
	createNamespaces    bool
	adoptUnmanaged      bool
	importDeletionDelay time.Duration
	importWorkers       int
	verifyEvery         int
	defaultLocality     policyValue
}

// AddFlags defines the flags on fs (docs/configuration.md lists each one).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
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
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "Address of /metrics; 0 disables it.")
	command.Alias(fs, "metrics-addr", "metrics-bind-address")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve /metrics over HTTPS, only to clients whose Kubernetes token may get /metrics (TokenReview and SubjectAccessReview), as kubebuilder's default (use :8443 with it).")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "With --metrics-secure: a directory with tls.crt and tls.key for /metrics; empty: a self-signed certificate.")
	fs.StringVar(&o.probeAddr, "health-probe-addr", ":8081", "Address of /healthz and /readyz.")
	command.Alias(fs, "health-probe-addr", "health-probe-bind-address")
	fs.DurationVar(&o.failbackMin, "registry-failback-min-interval", 15*time.Second, "After a failover, first wait before probing the earlier registry URLs again.")
	fs.DurationVar(&o.failbackMax, "registry-failback-max-interval", 2*time.Minute, "Longest wait between failback probes.")
	fs.DurationVar(&o.registryCallTimeout, "registry-call-timeout", 10*time.Second, "Timeout of one registry call on one URL before the next URL is tried.")
	fs.DurationVar(&o.healthInterval, "registry-health-interval", time.Second, "With several registry URLs: how often the current one's gRPC health is checked; one that does not answer SERVING within --registry-health-timeout is left for the next that does (0 turns the checks off).")
	fs.DurationVar(&o.healthTimeout, "registry-health-timeout", 2*time.Second, "Timeout of one health check of the current registry URL.")
	fs.BoolVar(&o.createNamespaces, "create-namespaces", false, "Create the namespace of an import when it does not exist, instead of holding the import until it is created.")
	fs.BoolVar(&o.adoptUnmanaged, "adopt-unmanaged-imports", false, "Take over ServiceImports with an import's name that this controller did not create.")
	fs.DurationVar(&o.importDeletionDelay, "import-deletion-delay", 0, "Keep imported objects this long after their import disappears from the registry; 0 deletes at once.")
	fs.DurationVar(&o.canaryInterval, "canary-interval", 0, "Export a canary Service (mcs-canary, in the leader-election namespace) whose endpoint changes this often, and measure how long every other cluster's canary changes take to reach this one (mcs_controller_propagation_seconds); 0 turns the canary off, otherwise between 1s and 10m.")
	fs.IntVar(&o.importWorkers, "import-workers", 8, "ServiceImports reconciled at once (1 to 64).")
	o.defaultLocality = mustPolicy(locality.Default)
	fs.Var(&o.defaultLocality, "default-locality", "The locality policy of imported Services whose exports set none (the multicluster.dynamo.nvidia.com/locality annotation): tiers among cluster, region and any, separated by commas; traffic goes to the first tier with a ready endpoint, else to every cluster. \"any\" spreads it over every cluster.")
	fs.IntVar(&o.verifyEvery, "verify-exports-every", 6, "Every this many lease renewals, compare the registry's copy of the cluster's exports with the cluster's and send them again if they differ; 0 never.")
	o.Logging.AddFlags(fs)
}

// Validate checks the flags' values: an error is a usage error.
func (o *Options) Validate() error {
	_, err := o.targets()
	return err
}

func (o *Options) targets() ([]registryclient.Target, error) {
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
	if c := o.canaryInterval; c < 0 || (c > 0 && (c < time.Second || c > 10*time.Minute)) {
		return nil, fmt.Errorf("--canary-interval %s: must be 0 (no canary) or between 1s and 10m", c)
	}
	if o.importWorkers < 1 || o.importWorkers > 64 {
		return nil, fmt.Errorf("--import-workers %d: must be between 1 and 64", o.importWorkers)
	}
	if o.healthInterval < 0 || (o.healthInterval > 0 && o.healthInterval < 100*time.Millisecond) {
		return nil, fmt.Errorf("--registry-health-interval %s: must be 0 (no health checks) or at least 100ms", o.healthInterval)
	}
	if o.healthTimeout < 100*time.Millisecond {
		return nil, fmt.Errorf("--registry-health-timeout %s: must be at least 100ms", o.healthTimeout)
	}
	return targets, nil
}

// policyValue is a locality policy flag, parsed when it is set: a bad one is refused with
// the flag's name before anything starts.
type policyValue []registryv1.LocalityTier

func (p *policyValue) String() string { return locality.Format(*p) }
func (p *policyValue) Type() string   { return "policy" }
func (p *policyValue) Set(v string) error {
	tiers, err := locality.Parse(v)
	if err != nil {
		return err
	}
	*p = tiers
	return nil
}

// mustPolicy parses a policy written in the code.
func mustPolicy(s string) policyValue {
	tiers, err := locality.Parse(s)
	if err != nil {
		panic(err)
	}
	return tiers
}

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
