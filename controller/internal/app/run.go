// Package app wires mcs-controller: its flags, the manager, the session, the import watch
// and the reconcilers, and the uninstall cleanup.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/apicheck"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/canary"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/exporter"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/identity"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/importer"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
)

// Run runs the controller until ctx ends: the manager with the exporter, the importer and
// the label reconciler, and on the leader the registry session, the import watch and the
// failback prober. Its steps: the cluster (API check, identity), the manager, the registry
// pool, the wiring; the manager then owns every lifetime, and the pool closes after it.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	targets, err := o.targets()
	if err != nil {
		return err
	}
	tlsFiles, err := registryclient.LoadTLSFiles(o.registryCAFile, o.registryCertFile, o.registryKeyFile, log)
	if err != nil {
		return err
	}
	restCfg, scheme, id, err := resolveCluster(ctx, o, log)
	if err != nil {
		return err
	}
	mgr, err := newManager(restCfg, scheme, o)
	if err != nil {
		return err
	}
	m := newMetrics(crmetrics.Registry)
	if _, ok := tlsFiles.ClientCertificateNotAfter(); ok {
		crmetrics.Registry.MustRegister(clientCertificateExpiry(tlsFiles.ClientCertificateNotAfter))
	}
	pool, err := registryclient.NewPool(registryclient.PoolOptions{
		Targets: targets, TLS: tlsFiles.Config, Logger: log, Metrics: m.hooks(), CallTimeout: o.registryCallTimeout,
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := wire(mgr, o, id, pool, m, log); err != nil {
		return err
	}
	log.Info("mcs-controller starting", "registry_urls", o.registryURLs.String(), "watch_namespaces", o.watchNamespaces.String(),
		"leader_election", o.leaderElect, "leader_election_namespace", leaderNamespace(o.leaderElectionNS))
	return mgr.Start(ctx)
}

// resolveCluster connects to the cluster, checks that it serves the MCS API, and resolves
// the cluster's identity (flags, else ClusterProperty and node labels).
func resolveCluster(ctx context.Context, o Options, log *slog.Logger) (*rest.Config, *runtime.Scheme, identity.Identity, error) {
	restCfg, scheme, direct, err := kubeClient()
	if err != nil {
		return nil, nil, identity.Identity{}, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, nil, identity.Identity{}, fmt.Errorf("discovery client: %w", err)
	}
	if err := apicheck.Check(disc, apicheck.MCS); err != nil {
		return nil, nil, identity.Identity{}, err
	}
	id, err := identity.Resolve(ctx, direct, o.clustersetID, o.clusterID, o.region)
	if err != nil {
		return nil, nil, identity.Identity{}, err
	}
	if id.Region == "" {
		log.Warn("no region: --region is not set and no Node has the label " + identity.RegionLabel)
	}
	log.Info("cluster identity", "clusterset", id.Clusterset, "cluster", id.ClusterID, "region", id.Region,
		"clusterset_from", id.Sources["clusterset"], "cluster_from", id.Sources["cluster"], "region_from", id.Sources["region"])
	return restCfg, scheme, id, nil
}

// newManager makes the controller-runtime manager: the watched namespaces, metrics, probes
// and leader election as the flags say.
func newManager(restCfg *rest.Config, scheme *runtime.Scheme, o Options) (manager.Manager, error) {
	cacheOpts := cache.Options{}
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	metricsOptions := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		// kubebuilder's default: HTTPS, and only for tokens allowed to get /metrics.
		metricsOptions.SecureServing, metricsOptions.CertDir = true, o.metricsCertDir
		metricsOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(restCfg, manager.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsOptions,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       leaderNamespace(o.leaderElectionNS),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaderLeaseDuration,
		RenewDeadline:                 &o.leaderRenewDeadline,
		RetryPeriod:                   &o.leaderRetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// wire adds the controller's parts to the manager.
//
// The loop, read top-down: the session keeps the cluster registered and tells the exporter
// (Registered: send every export; StateChanged: reconcile the conditions); the import
// watch mirrors the registry's imports and tells the exporter (Conflict conditions) and
// the importer (the cluster's ServiceImports, Services and EndpointSlices). The exporter
// reads both; the listeners are named where each runs.
func wire(mgr manager.Manager, o Options, id identity.Identity, pool *registryclient.Pool, m *metrics, log *slog.Logger) error {
	session := &registryclient.Session{
		Pool: pool, Clusterset: id.Clusterset, ClusterID: id.ClusterID, Region: id.Region,
		LeaseDuration: o.leaseDuration, RenewInterval: o.renewInterval, RetryInterval: 2 * time.Second,
		Log: log, Metrics: m.hooks(), VerifyEvery: o.verifyEvery, Version: buildinfo.Version,
	}
	// After the registry's epoch changes, the importer keeps other clusters' endpoints
	// until each cluster sends its exports again, at most one lease: a cluster gone longer
	// has left.
	watch := &registryclient.ImportWatch{Pool: pool, Clusterset: id.Clusterset, IncludeEndpoints: true, Log: log,
		RefillHold: o.leaseDuration, OnEpochChange: session.Check}
	exp := &exporter.Reconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("mcs-controller"), Registry: pool,
		Session: session, Imports: watch,
		Clusterset: id.Clusterset, ClusterID: id.ClusterID, BatchPeriod: o.endpointBatchPeriod,
		Metrics: exporter.Metrics{ExportWrite: m.exportWrite},
	}
	imp := importer.New(importer.Config{
		Client: mgr.GetClient(), Imports: watch, WatchNamespaces: o.watchNamespaces, CreateNamespaces: o.createNamespaces,
		AdoptUnmanaged: o.adoptUnmanaged, DeletionDelay: o.importDeletionDelay, Workers: o.importWorkers,
		ClusterID: id.ClusterID, Region: id.Region, DefaultLocality: o.defaultLocality,
		Metrics: importer.Metrics{Write: m.importWrite, Held: m.importsHeld, HeldClusters: m.clustersHeld, Refused: m.importsRefused,
			Tier: m.localityTier, TierGone: m.localityGone},
		Recorder: mgr.GetEventRecorder("mcs-controller"),
	})
	var canaryWriter *canary.Writer
	if o.canaryInterval > 0 {
		ns := leaderNamespace(o.leaderElectionNS)
		rec := &canary.Recorder{Namespace: ns, Clock: session, Observe: m.propagated}
		imp.Canary = rec
		canaryWriter = &canary.Writer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: ns, ClusterID: id.ClusterID, Interval: o.canaryInterval,
			Clock: session, Recorder: rec, Log: log}
	}
	for _, setup := range []func(ctrl.Manager) error{exp.SetupWithManager, imp.SetupWithManager, (&exporter.LabelReconciler{Client: mgr.GetClient()}).SetupWithManager} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	// The session, the import watch, the failback prober and the health watch run on the
	// leader only.
	for _, r := range []func(context.Context) error{
		func(ctx context.Context) error {
			// Exports are read from the cache; wait for it before the first registration.
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return errors.New("cache did not sync")
			}
			return session.Run(ctx, exp)
		},
		func(ctx context.Context) error { return watch.Run(ctx, exp, imp) },
		imp.Resync,
		func(ctx context.Context) error { pool.RunFailback(ctx, o.failbackMin, o.failbackMax); return nil },
		func(ctx context.Context) error {
			pool.RunHealthWatch(ctx, o.healthInterval, o.healthTimeout)
			return nil
		},
	} {
		if err := mgr.Add(manager.RunnableFunc(r)); err != nil {
			return err
		}
	}
	if canaryWriter != nil {
		if err := mgr.Add(manager.RunnableFunc(canaryWriter.Run)); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
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

// kubeClient loads the kubeconfig (controller-runtime's --kubeconfig, $KUBECONFIG, in-cluster)
// and returns it with the scheme and an uncached client.
func kubeClient() (*rest.Config, *runtime.Scheme, client.Client, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, nil, err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, nil, err
	}
	return restCfg, scheme, c, nil
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
