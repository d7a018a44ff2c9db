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
	Log  *slog.Logger
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
