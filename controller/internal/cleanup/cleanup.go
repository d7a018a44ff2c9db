// Package cleanup removes what mcs-controller wrote into its cluster, for an uninstall:
// its finalizer from every ServiceExport (so deleting one no longer waits for a controller
// that is gone), the ServiceExports it made from the export label, and the ServiceImports,
// derived Services and EndpointSlices it imported.
package cleanup

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/exporter"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// Options configure Run.
type Options struct {
	// Namespaces to clean; empty: all.
	Namespaces []string
	// LeaderLease is the controller's leader-election Lease. While a replica holds it the
	// controller runs and would put back what Run removes, so Run waits for it first.
	LeaderLease client.ObjectKey
	// Wait bounds the wait for the Lease to be free.
	Wait time.Duration
	// ControllerDeployment names the controller's Deployment in the Lease's namespace:
	// a holder that was one of its pods, and whose pod is gone, holds the Lease no longer.
	// `helm uninstall` deletes the controller's RBAC and ServiceAccount as it deletes its
	// Deployment, so the stopping replica cannot release the Lease, and without this Run
	// would wait for the Lease to expire. Empty: the Lease alone says.
	ControllerDeployment string
	Log                  *slog.Logger
	// Now returns the current time; nil: time.Now.
	Now func() time.Time
}

// Result counts what Run changed.
type Result struct {
	FinalizersRemoved, ExportsDeleted, ImportsDeleted, ServicesDeleted, SlicesDeleted int
}

func (r Result) String() string {
	return fmt.Sprintf("removed the finalizer from %d ServiceExports; deleted %d ServiceExports made from the %s label, %d ServiceImports, %d derived Services and %d EndpointSlices",
		r.FinalizersRemoved, r.ExportsDeleted, exporter.ExportLabel, r.ImportsDeleted, r.ServicesDeleted, r.SlicesDeleted)
}

// Run waits until no controller replica holds the leader Lease, then removes everything
// the controller wrote. It is idempotent: a second run finds nothing and changes nothing.
func Run(ctx context.Context, c client.Client, o Options) (Result, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := waitLeaseFree(ctx, c, o); err != nil {
		return Result{}, err
	}
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var res Result
	for _, ns := range namespaces {
		if err := cleanNamespace(ctx, c, ns, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// held reports whether a replica holds the Lease now.
func (o Options) held(l *coordinationv1.Lease) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return false // released on a clean stop (LeaderElectionReleaseOnCancel)
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return true
	}
	return o.now().Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

func waitLeaseFree(ctx context.Context, c client.Client, o Options) error {
	if o.LeaderLease.Name == "" {
		return nil
	}
	deadline := o.now().Add(o.Wait)
	logged := false
	for {
		var l coordinationv1.Lease
		err := c.Get(ctx, o.LeaderLease, &l)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("read the leader Lease %s: %w", o.LeaderLease, err)
		case !o.held(&l):
			return nil
		case o.holderGone(ctx, c, &l):
			o.Log.Info("the leader Lease's holder is gone: its pod no longer exists", "lease", o.LeaderLease.String(), "holder", *l.Spec.HolderIdentity)
			return nil
		case !o.now().Before(deadline):
			return fmt.Errorf("a controller replica (%s) still holds the leader Lease %s after %s: stop mcs-controller first "+
				"(helm uninstall deletes it; or kubectl scale deployment/mcs-controller --replicas=0), then run the cleanup again",
				*l.Spec.HolderIdentity, o.LeaderLease, o.Wait)
		}
		if !logged {
			o.Log.Info("waiting for the controller to stop: a replica holds the leader Lease", "lease", o.LeaderLease.String(), "holder", *l.Spec.HolderIdentity)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// holderGone reports whether the Lease's holder was a pod of the controller's Deployment
// that no longer exists or whose containers have stopped. A holder's identity is its
// hostname (a pod's name, unless longer than a hostname may be) and a suffix; a holder
// that is not such a pod, or a pod that cannot be read, is not gone.
func (o Options) holderGone(ctx context.Context, c client.Client, l *coordinationv1.Lease) bool {
	pod, ok := o.holderPod(*l.Spec.HolderIdentity)
	if !ok {
		return false
	}
	var p corev1.Pod
	err := c.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: pod}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	}
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// holderPod returns the pod name in a holder identity ("<hostname>_<id>", as
// controller-runtime writes it) when it is a name of a pod of the controller's Deployment:
// "<deployment>-<pod-template-hash>-<suffix>" (both generated), shorter than a hostname's 63 characters (a
// longer name is cut in the hostname).
func (o Options) holderPod(holder string) (string, bool) {
	host, _, ok := strings.Cut(holder, "_")
	if !ok || o.ControllerDeployment == "" || len(host) >= 63 {
		return "", false
	}
	rest, ok := strings.CutPrefix(host, o.ControllerDeployment+"-")
	if !ok {
		return "", false
	}
	hash, suffix, ok := strings.Cut(rest, "-")
	if !ok || hash == "" || len(suffix) != 5 || !generated(hash) || !generated(suffix) {
		return "", false
	}
	return host, true
}

// generated reports whether s is spelled as Kubernetes spells generated names (a
// pod-template-hash, a pod name's random suffix): consonants and digits without vowels.
func generated(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", r) {
			return false
		}
	}
	return true
}

func cleanNamespace(ctx context.Context, c client.Client, ns string, res *Result) error {
	var exports mcsv1beta1.ServiceExportList
	if err := c.List(ctx, &exports, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list ServiceExports: %w", err)
	}
	for i := range exports.Items {
		se := &exports.Items[i]
		if i := slices.Index(se.Finalizers, names.Finalizer); i >= 0 {
			// A JSON patch that tests the list first: a concurrent change of the
			// finalizers makes it fail instead of dropping someone else's finalizer.
			patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, names.Finalizer, i)
			if err := c.Patch(ctx, se, client.RawPatch("application/json-patch+json", []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("remove the finalizer of ServiceExport %s/%s: %w", se.Namespace, se.Name, err)
			}
			res.FinalizersRemoved++
		}
		if owner := metav1.GetControllerOf(se); owner != nil && owner.Kind == "Service" && owner.APIVersion == "v1" {
			if err := deleteObject(ctx, c, "ServiceExport", se); err != nil {
				return err
			}
			res.ExportsDeleted++
		}
	}
	var imports mcsv1beta1.ServiceImportList
	if err := c.List(ctx, &imports, client.InNamespace(ns), client.MatchingLabels{names.ManagedByLabel: names.ManagedBy}); err != nil {
		return fmt.Errorf("list ServiceImports: %w", err)
	}
	for i := range imports.Items {
		if err := deleteObject(ctx, c, "ServiceImport", &imports.Items[i]); err != nil {
			return err
		}
		res.ImportsDeleted++
	}
	var services corev1.ServiceList
	if err := c.List(ctx, &services, client.InNamespace(ns), client.MatchingLabels{names.ManagedByLabel: names.ManagedBy}); err != nil {
		return fmt.Errorf("list derived Services: %w", err)
	}
	for i := range services.Items {
		if err := deleteObject(ctx, c, "Service", &services.Items[i]); err != nil {
			return err
		}
		res.ServicesDeleted++
	}
	var epSlices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &epSlices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy}); err != nil {
		return fmt.Errorf("list EndpointSlices: %w", err)
	}
	for i := range epSlices.Items {
		if err := deleteObject(ctx, c, "EndpointSlice", &epSlices.Items[i]); err != nil {
			return err
		}
		res.SlicesDeleted++
	}
	return nil
}

func deleteObject(ctx context.Context, c client.Client, kind string, o client.Object) error {
	if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}
