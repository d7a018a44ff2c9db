package importer

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// remove deletes what this controller imported for a Service that no longer has an import,
// after DeletionDelay, and not before refill has passed (held as after a registry restart).
func (r *Reconciler) remove(ctx context.Context, key types.NamespacedName, refill time.Duration) (reconcile.Result, error) {
	si := &mcsv1beta1.ServiceImport{}
	siErr := r.Client.Get(ctx, key, si)
	if siErr != nil && !apierrors.IsNotFound(siErr) {
		return reconcile.Result{}, siErr
	}
	ownsImport := siErr == nil && si.Labels[names.ManagedByLabel] == names.ManagedBy
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(key.Namespace),
		client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy, mcsv1beta1.LabelServiceName: key.Name}); err != nil {
		return reconcile.Result{}, err
	}
	derived := &corev1.Service{}
	dErr := r.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: DerivedName(key.Namespace, key.Name)}, derived)
	ownsDerived := dErr == nil && derived.Labels[names.ManagedByLabel] == names.ManagedBy
	if !ownsImport && !ownsDerived && len(slices.Items) == 0 {
		r.setHeld("unmanaged", key, false)
		r.setHeld("registry_restart", key, false)
		return reconcile.Result{}, nil
	}
	r.setHeld("registry_restart", key, refill > 0)
	if refill > 0 {
		return reconcile.Result{RequeueAfter: refill}, nil
	}
	if r.DeletionDelay > 0 {
		r.mu.Lock()
		since, ok := r.missing[key]
		if !ok {
			since = time.Now()
			r.missing[key] = since
		}
		r.mu.Unlock()
		if wait := r.DeletionDelay - time.Since(since); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	var errs []error
	for i := range slices.Items {
		if err := r.Client.Delete(ctx, &slices.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		} else {
			r.write("EndpointSlice", "delete")
		}
	}
	if ownsDerived {
		if err := r.Client.Delete(ctx, derived); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		} else {
			r.write("Service", "delete")
		}
	}
	if ownsImport {
		if err := r.Client.Delete(ctx, si); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		} else {
			r.write("ServiceImport", "delete")
		}
	}
	if len(errs) == 0 {
		r.mu.Lock()
		delete(r.missing, key)
		r.mu.Unlock()
		r.forgetTier(key)
		ctrl.LoggerFrom(ctx).Info("import removed", "service", key.String())
	}
	return reconcile.Result{}, errors.Join(errs...)
}
