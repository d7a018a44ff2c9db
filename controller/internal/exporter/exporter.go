// Package exporter is the export path of mcs-controller: it sends every ServiceExport of
// the cluster, with its Service's endpoints, to the registry, and sets the ServiceExport's
// Valid, Ready and Conflict conditions from what it observes: the Service, the session, the
// registry's answer and the registry's imports.
package exporter

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/locality"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// Reasons of the exporter's Events and conditions (its object names are in package names).
const (
	// EventExportFailed is the Warning Event reason when the registry rejects an export.
	EventExportFailed = "ExportFailed"
	// ReasonClusterLeaseExpired is the Ready reason when the cluster's lease is gone.
	ReasonClusterLeaseExpired = "ClusterLeaseExpired"
	// ReasonInvalidLocality is the Valid reason when the locality annotation does not parse.
	ReasonInvalidLocality = "InvalidLocality"
)

// localityOf is the export's locality policy: the ServiceExport's annotation, else the
// Service's (an export made from the export label has no annotation of the user's), else
// none.
func localityOf(se *mcsv1beta1.ServiceExport, svc *corev1.Service) ([]registryv1.LocalityTier, error) {
	for _, o := range []metav1.Object{se, svc} {
		if v, ok := o.GetAnnotations()[locality.Annotation]; ok {
			tiers, err := locality.Parse(v)
			if err != nil {
				kind := "ServiceExport"
				if o == metav1.Object(svc) {
					kind = "Service"
				}
				return nil, fmt.Errorf("the %s's annotation %s=%q: %w", kind, locality.Annotation, v, err)
			}
			return tiers, nil
		}
	}
	return nil, nil
}

// Registry is what the exporter needs of the registry connection.
type Registry interface {
	Call(ctx context.Context, fn func(context.Context, registryv1.RegistryServiceClient) error) error
}

// Session is what the exporter needs of the cluster's session.
type Session interface {
	State() registryclient.State
	Lost()
}

// Imports is what the exporter reads of the registry's imports.
type Imports interface {
	Get(k types.NamespacedName) *registryv1.ServiceImport
	// Synced: a snapshot has been received, so Get shows the registry's imports.
	Synced() bool
}

// Metrics are the exporter's hooks. Any field may be nil.
type Metrics struct {
	// ExportWrite is called after each write to the registry with its outcome.
	ExportWrite func(op string, ok bool)
}

// LimitRetry is how long an export the registry refused for a per-cluster limit waits
// before it is sent again.
const LimitRetry = 30 * time.Second

// Reconciler reconciles ServiceExports.
type Reconciler struct {
	Client     client.Client
	Recorder   recorder.EventRecorder
	Registry   Registry
	Session    Session
	Imports    Imports
	Clusterset string
	ClusterID  string
	// BatchPeriod delays the reconcile after an EndpointSlice event, so endpoint churn is
	// sent in one write.
	BatchPeriod time.Duration
	Metrics     Metrics
	// Now returns the current time; nil: time.Now.
	Now func() time.Time

	mu   sync.Mutex
	sent map[types.NamespacedName]*sent
	// announced is, per ServiceExport and condition type, the "status reason" last
	// recorded as an Event: two reconciles that both read a cached object older than the
	// first one's write see the same transition, and only one Event is recorded.
	announced map[types.NamespacedName]map[string]string
	// syncedGen is the session generation of the last SyncAll: a SyncAll of the same
	// generation is a periodic verification.
	syncedGen int64
	// events feeds reconciles triggered from outside the cluster (session, imports).
	events chan event.TypedGenericEvent[*mcsv1beta1.ServiceExport]
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.sent = map[types.NamespacedName]*sent{}
	r.announced = map[types.NamespacedName]map[string]string{}
	r.events = make(chan event.TypedGenericEvent[*mcsv1beta1.ServiceExport], 1024)
	sliceHandler := handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueueSlice(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueueSlice(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueueSlice(e.Object, q)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("serviceexport").
		For(&mcsv1beta1.ServiceExport{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Watches(&discoveryv1.EndpointSlice{}, sliceHandler).
		WatchesRawSource(source.Channel(r.events, &handler.TypedEnqueueRequestForObject[*mcsv1beta1.ServiceExport]{})).
		Complete(r)
}

// enqueueSlice queues the Service of a slice. Leading and trailing edge: the first change
// of a Service that was not written within the batch period is reconciled at once, so a
// readiness flip reaches the registry without waiting; changes within the period after a
// write wait for its end and become one reconcile (the reconcile also writes a Service at
// most once per period), so endpoint churn still costs one write per period.
func (r *Reconciler) enqueueSlice(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	labels := o.GetLabels()
	name := labels[discoveryv1.LabelServiceName]
	if name == "" || labels[discoveryv1.LabelManagedBy] == names.ManagedBy {
		return
	}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: name}
	r.mu.Lock()
	last := r.sent[key]
	r.mu.Unlock()
	if last == nil {
		q.Add(reconcile.Request{NamespacedName: key})
		return
	}
	if wait := r.BatchPeriod - r.now().Sub(last.at); wait > 0 {
		q.AddAfter(reconcile.Request{NamespacedName: key}, wait)
		return
	}
	q.Add(reconcile.Request{NamespacedName: key})
}

// Trigger queues reconciles of the named ServiceExports (all of them when keys is nil).
func (r *Reconciler) Trigger(ctx context.Context, keys []types.NamespacedName) {
	if keys == nil {
		var list mcsv1beta1.ServiceExportList
		if err := r.Client.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list ServiceExports to reconcile")
			return
		}
		listed := make(map[types.NamespacedName]bool, len(list.Items))
		for _, se := range list.Items {
			k := types.NamespacedName{Namespace: se.Namespace, Name: se.Name}
			listed[k] = true
			keys = append(keys, k)
		}
		// And what was sent of ServiceExports deleted since the list the sync sent.
		r.mu.Lock()
		for k := range r.sent {
			if !listed[k] {
				keys = append(keys, k)
			}
		}
		r.mu.Unlock()
	}
	for _, k := range keys {
		se := &mcsv1beta1.ServiceExport{}
		se.Namespace, se.Name = k.Namespace, k.Name
		select {
		case r.events <- event.TypedGenericEvent[*mcsv1beta1.ServiceExport]{Object: se}:
		case <-ctx.Done():
			return
		}
	}
}

// desired is the content to export, or nil with the Valid condition when the export is
// not valid.
func (r *Reconciler) desired(ctx context.Context, se *mcsv1beta1.ServiceExport) (*registryv1.ExportContent, metav1.Condition, error) {
	var svc corev1.Service
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(se), &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoService),
				fmt.Sprintf("Service %s/%s does not exist", se.Namespace, se.Name)), nil
		}
		return nil, metav1.Condition{}, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonInvalidServiceType),
			"ExternalName Services cannot be exported"), nil
	}
	policy, err := localityOf(se, &svc)
	if err != nil {
		return nil, cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, ReasonInvalidLocality, err.Error()), nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(se.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: se.Name}); err != nil {
		return nil, metav1.Condition{}, err
	}
	own := slices.Items[:0]
	for _, s := range slices.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != names.ManagedBy {
			own = append(own, s)
		}
	}
	content := &registryv1.ExportContent{
		Service:        &registryv1.ServiceKey{Namespace: se.Namespace, Name: se.Name},
		Spec:           Spec(&svc, se),
		EndpointGroups: EndpointGroups(own),
	}
	content.Spec.Locality = policy
	return content, cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid), "the Service can be exported"), nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	se := &mcsv1beta1.ServiceExport{}
	if err := r.Client.Get(ctx, req.NamespacedName, se); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		// Gone without the finalizer: deleted before its first reconcile, while a sync after
		// the registration had already sent it. What was sent is withdrawn all the same.
		r.mu.Lock()
		_, wasSent := r.sent[req.NamespacedName]
		r.mu.Unlock()
		if wasSent {
			return reconcile.Result{}, r.deleteExport(ctx, req.NamespacedName)
		}
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if !se.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(se, names.Finalizer) {
			return reconcile.Result{}, nil
		}
		if err := r.deleteExport(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(se, names.Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, se))
	}
	if controllerutil.AddFinalizer(se, names.Finalizer) {
		if err := r.Client.Update(ctx, se); err != nil {
			return reconcile.Result{}, err
		}
	}

	content, valid, err := r.desired(ctx, se)
	if err != nil {
		return reconcile.Result{}, err
	}
	conds := []metav1.Condition{valid}
	var result reconcile.Result
	var retErr error
	if content == nil {
		// Not valid: nothing is exported. Remove what this process sent; exports the registry
		// holds from before a restart are removed by SyncAll, so an invalid export costs no
		// registry write on every reconcile.
		r.mu.Lock()
		_, wasSent := r.sent[req.NamespacedName]
		r.mu.Unlock()
		if wasSent {
			if err := r.deleteExport(ctx, req.NamespacedName); err != nil {
				retErr = err
			}
		}
		conds = append(conds,
			cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonPending), "not exported: "+valid.Message),
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "not exported"))
	} else {
		ready, conflict, res, err := r.export(ctx, req.NamespacedName, se, content)
		conds = append(conds, ready, conflict)
		result, retErr = res, err
	}
	if err := r.setConditions(ctx, se, conds); err != nil {
		return reconcile.Result{}, err
	}
	return result, retErr
}

// Registered sends every export to the registry after the session registered the cluster
// (the session's listener).
func (r *Reconciler) Registered(ctx context.Context, generation int64) error {
	return r.SyncAll(ctx, generation)
}

// StateChanged reconciles every export when the session's state changes, so their Ready
// conditions follow it (the session's listener; it must not wait for the reconciles).
func (r *Reconciler) StateChanged(ctx context.Context) { go r.Trigger(ctx, nil) }

// ImportsChanged reconciles the exports whose import changed: their Conflict condition
// follows the registry's merge (the import watch's listener).
func (r *Reconciler) ImportsChanged(ctx context.Context, keys []types.NamespacedName) {
	r.Trigger(ctx, keys)
}
