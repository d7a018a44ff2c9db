package exporter

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ExportLabel on a Service, set to "true", makes the controller create a ServiceExport of
// the same name, owned by the Service; removing the label deletes that ServiceExport.
const ExportLabel = "dynamo.nvidia.com/mcs-export"

// LabelReconciler turns the export label into ServiceExports. It never takes over or
// deletes a ServiceExport it did not create: those are not controlled by the Service.
type LabelReconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller.
func (r *LabelReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("service-export-label").
		For(&corev1.Service{}).
		Watches(&mcsv1beta1.ServiceExport{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *LabelReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var svc corev1.Service
	svcFound := true
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		svcFound = false
	}
	var se mcsv1beta1.ServiceExport
	seFound := true
	if err := r.Client.Get(ctx, req.NamespacedName, &se); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		seFound = false
	}
	wanted := svcFound && svc.DeletionTimestamp.IsZero() && svc.Labels[ExportLabel] == "true"
	switch {
	case wanted && !seFound:
		se = mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
		if err := controllerutil.SetControllerReference(&svc, &se, r.Client.Scheme()); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, client.IgnoreAlreadyExists(r.Client.Create(ctx, &se))
	case !wanted && seFound && svcFound && metav1.IsControlledBy(&se, &svc) && se.DeletionTimestamp.IsZero():
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &se))
	}
	return reconcile.Result{}, nil
}
