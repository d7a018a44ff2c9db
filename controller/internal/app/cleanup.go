package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/cleanup"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
)

// CleanupOptions are the flags of "mcs-controller cleanup".
type CleanupOptions struct {
	Kubeconfig string
	namespaces stringList
	leNS, leID string
	deployment string
	wait       time.Duration
	Logging    command.Logging
}

// AddFlags defines the flags of "mcs-controller cleanup" on fs.
func (o *CleanupOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Kubeconfig file; empty: $KUBECONFIG, else the in-cluster configuration.")
	fs.Var(&o.namespaces, "watch-namespaces", "Namespaces to clean, comma-separated; empty: all.")
	fs.StringVar(&o.leNS, "leader-election-namespace", "", "Namespace of the controller's leader-election Lease; empty: $POD_NAMESPACE, else mcs-system.")
	fs.StringVar(&o.leID, "leader-election-id", defaultLeaderElectionID, "Name of the controller's leader-election Lease; empty: do not wait for it.")
	fs.StringVar(&o.deployment, "controller-deployment", "", "Name of the controller's Deployment in the Lease's namespace: a Lease holder that was one of its pods, and whose pod is gone, holds it no longer; empty: wait for the Lease to be released or to expire.")
	fs.DurationVar(&o.wait, "wait", 2*time.Minute, "How long to wait for the controller to release its leader-election Lease before giving up.")
	o.Logging.AddFlags(fs)
}

// Cleanup removes what the controller wrote into the cluster, for an uninstall, once the
// controller has stopped (it waits for the leader-election Lease to be released).
func Cleanup(ctx context.Context, o CleanupOptions, log *slog.Logger) error {
	return cleanupCluster(ctx, []string(o.namespaces), leaderNamespace(o.leNS), o.leID, o.deployment, o.wait, log)
}

func cleanupCluster(ctx context.Context, namespaces []string, leNS, leID, deployment string, wait time.Duration, log *slog.Logger) error {
	_, _, c, err := kubeClient()
	if err != nil {
		return err
	}
	opts := cleanup.Options{Namespaces: namespaces, Wait: wait, ControllerDeployment: deployment, Log: log}
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
