package importer

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// remove handles a Service whose import is gone from the registry: what the hold keeps of
// its source clusters stays, with the ServiceImport, its derived Service and an
// EndpointsHeld condition naming them; everything else this controller imported for it is
// deleted.
func (r *Reconciler) remove(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	si := &mcsv1beta1.ServiceImport{}
	siErr := r.Client.Get(ctx, key, si)
	if siErr != nil && !apierrors.IsNotFound(siErr) {
		return reconcile.Result{}, siErr
	}
	ownsImport := siErr == nil && si.Labels[names.ManagedByLabel] == names.ManagedBy
	var eps discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &eps, client.InNamespace(key.Namespace),
		client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy, mcsv1beta1.LabelServiceName: key.Name}); err != nil {
		return reconcile.Result{}, err
	}
	derived := &corev1.Service{}
	dErr := r.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: DerivedName(key.Namespace, key.Name)}, derived)
	ownsDerived := dErr == nil && derived.Labels[names.ManagedByLabel] == names.ManagedBy
	now := time.Now()
	if !ownsImport && !ownsDerived && len(eps.Items) == 0 {
		r.setHeld("unmanaged", key, false)
		r.settleHolds(key, nil, now)
		return reconcile.Result{}, nil
	}
	// The source clusters whose objects are here: the slices' and the import's status'.
	var sources []string
	for _, s := range eps.Items {
		sources = append(sources, s.Labels[mcsv1beta1.LabelSourceCluster])
	}
	if ownsImport {
		for _, c := range si.Status.Clusters {
			sources = append(sources, c.Cluster)
		}
	}
	slices.Sort(sources)
	var keptClusters []string
	for _, c := range slices.Compact(sources) {
		if c != "" && r.keep(key, c, now) {
			keptClusters = append(keptClusters, c)
		}
	}
	held := r.settleHolds(key, keptClusters, now)
	if len(keptClusters) > 0 {
		var errs []error
		for i := range eps.Items {
			if slices.Contains(keptClusters, eps.Items[i].Labels[mcsv1beta1.LabelSourceCluster]) {
				continue
			}
			if err := r.Client.Delete(ctx, &eps.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			} else {
				r.write("EndpointSlice", "delete")
			}
		}
		if ownsImport {
			errs = append(errs, r.heldStatus(ctx, si, held))
		}
		return reconcile.Result{RequeueAfter: held.next}, errors.Join(errs...)
	}
	var errs []error
	for i := range eps.Items {
		if err := r.Client.Delete(ctx, &eps.Items[i]); err != nil && !apierrors.IsNotFound(err) {
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
		r.forgetTier(key)
		ctrl.LoggerFrom(ctx).Info("import removed", "service", key.String())
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// heldStatus is the status of a ServiceImport whose import is gone while the hold keeps
// some of its source clusters: those clusters, and the EndpointsHeld condition.
func (r *Reconciler) heldStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, held kept) error {
	st := si.Status.DeepCopy()
	st.Clusters = statusClusters(nil, held)
	meta.SetStatusCondition(&st.Conditions, endpointsHeld(held, si.Generation))
	return r.patchStatus(ctx, si, st)
}
