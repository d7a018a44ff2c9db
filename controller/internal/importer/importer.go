// Package importer is the import path of mcs-controller: for every import of the
// clusterset it writes a ServiceImport, its derived Service and the imported EndpointSlices
// into the cluster, and removes them when the import goes. It writes only what differs.
package importer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// Imports is what the importer reads of the registry's watch.
type Imports interface {
	// GetHeld returns the import and the source clusters whose entries in it are held
	// after the registry's epoch changed (see registryclient.ImportWatch).
	GetHeld(k registryclient.ServiceKey) (*registryv1.ServiceImport, []string)
	Keys() []registryclient.ServiceKey
	Synced() bool
}

// Names of the ServiceImport condition this controller adds to the mcs-api ones.
const (
	// ConditionEndpointsHeld is True while the import keeps source clusters' endpoints
	// from before the registry restarted (or another replica answered), until those
	// clusters send their exports again or their lease would have expired.
	ConditionEndpointsHeld = "EndpointsHeld"
	// ReasonRegistryRestarted: EndpointsHeld is True.
	ReasonRegistryRestarted = "RegistryRestarted"
	// ReasonNoneHeld: EndpointsHeld is False; every endpoint is what the registry holds.
	ReasonNoneHeld = "NoneHeld"
)

// Metrics are the importer's hooks. Any field may be nil.
type Metrics struct {
	// Write is called for each write to the API server: kind (ServiceImport, Service,
	// EndpointSlice, Namespace) and op (create, update, delete).
	Write func(kind, op string)
	// Held reports the number of imports held, by reason (namespace_missing, unmanaged,
	// registry_restart).
	Held func(reason string, n int)
}

// Reconciler applies imports. Requests are namespace/name of the exported Service.
type Reconciler struct {
	Client  client.Client
	Imports Imports
	// WatchNamespaces limits imports to these namespaces; empty: all.
	WatchNamespaces []string
	// CreateNamespaces creates a missing namespace instead of holding the import.
	CreateNamespaces bool
	// AdoptUnmanaged takes over ServiceImports this controller did not create.
	AdoptUnmanaged bool
	// DeletionDelay keeps imported objects this long after their import disappeared from
	// the registry, so a registry that lost its records (a memory-store restart) does not
	// empty the cluster before the controllers send their exports again. 0: delete at once.
	DeletionDelay time.Duration
	// Workers is how many ServiceImports are reconciled at once (--import-workers).
	Workers int
	Log     *slog.Logger
	Metrics Metrics

	mu      sync.Mutex
	missing map[types.NamespacedName]time.Time
	held    map[string]map[types.NamespacedName]bool
	events  chan event.GenericEvent
}

func (r *Reconciler) watched(ns string) bool {
	if len(r.WatchNamespaces) == 0 {
		return true
	}
	for _, w := range r.WatchNamespaces {
		if w == ns {
			return true
		}
	}
	return false
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.missing = map[types.NamespacedName]time.Time{}
	r.held = map[string]map[types.NamespacedName]bool{"namespace_missing": {}, "unmanaged": {}, "registry_restart": {}}
	r.events = make(chan event.GenericEvent, 4096)
	byServiceLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[mcsv1beta1.LabelServiceName]
		if name == "" || (o.GetLabels()[ManagedByLabel] != ManagedBy && o.GetLabels()[discoveryv1.LabelManagedBy] != ManagedBy) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	workers := r.Workers
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("serviceimport").
		// Imports of different Services are independent: reconcile several at once, so a
		// large clusterset's import is bounded by the API server, not by one round trip at
		// a time (controller-runtime never reconciles one key twice at once).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&mcsv1beta1.ServiceImport{}).
		Watches(&corev1.Service{}, byServiceLabel).
		Watches(&discoveryv1.EndpointSlice{}, byServiceLabel).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, k := range r.Imports.Keys() {
				if k.Namespace == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: k.Namespace, Name: k.Name}})
				}
			}
			return out
		})).
		WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Trigger queues the Services whose import changed.
func (r *Reconciler) Trigger(ctx context.Context, keys []registryclient.ServiceKey) {
	for _, k := range keys {
		o := &mcsv1beta1.ServiceImport{}
		o.Namespace, o.Name = k.Namespace, k.Name
		select {
		case r.events <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
			return
		}
	}
}

// Resync queues every import the registry has and every import this controller wrote, so
// that imports the registry no longer has are removed. It runs once the watch has its
// first snapshot.
func (r *Reconciler) Resync(ctx context.Context) error {
	for !r.Imports.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	keys := r.Imports.Keys()
	var imports mcsv1beta1.ServiceImportList
	if err := r.Client.List(ctx, &imports, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		return fmt.Errorf("list ServiceImports: %w", err)
	}
	for _, si := range imports.Items {
		keys = append(keys, registryclient.ServiceKey{Namespace: si.Namespace, Name: si.Name})
	}
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.MatchingLabels{discoveryv1.LabelManagedBy: ManagedBy}); err != nil {
		return fmt.Errorf("list EndpointSlices: %w", err)
	}
	for _, s := range slices.Items {
		keys = append(keys, registryclient.ServiceKey{Namespace: s.Namespace, Name: s.Labels[mcsv1beta1.LabelServiceName]})
	}
	r.Log.Info("import resync", "keys", len(keys))
	r.Trigger(ctx, keys)
	return nil
}

func (r *Reconciler) write(kind, op string) {
	if f := r.Metrics.Write; f != nil {
		f(kind, op)
	}
}

func (r *Reconciler) setHeld(reason string, key types.NamespacedName, held bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.held[reason][key]
	if held == was {
		return
	}
	if held {
		r.held[reason][key] = true
	} else {
		delete(r.held[reason], key)
	}
	if f := r.Metrics.Held; f != nil {
		f(reason, len(r.held[reason]))
	}
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) || req.Name == "" {
		return reconcile.Result{}, nil
	}
	if !r.Imports.Synced() {
		// Without the registry's snapshot every import would look gone.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	key := registryclient.ServiceKey{Namespace: req.Namespace, Name: req.Name}
	imp, heldClusters := r.Imports.GetHeld(key)
	r.setHeld("registry_restart", req.NamespacedName, len(heldClusters) > 0)
	if imp == nil {
		r.setHeld("namespace_missing", req.NamespacedName, false)
		return r.remove(ctx, req.NamespacedName)
	}
	r.mu.Lock()
	delete(r.missing, req.NamespacedName)
	r.mu.Unlock()

	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		if !r.CreateNamespaces {
			// Held: the Namespace watch queues the import when the namespace is created.
			r.setHeld("namespace_missing", req.NamespacedName, true)
			return reconcile.Result{}, nil
		}
		ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: req.Namespace}}
		if err := r.Client.Create(ctx, &ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("create namespace %s: %w", req.Namespace, err)
		}
		r.write("Namespace", "create")
		r.Log.Info("created the namespace of an import", "namespace", req.Namespace)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	r.setHeld("namespace_missing", req.NamespacedName, false)

	si, err := r.applyServiceImport(ctx, req.NamespacedName, imp)
	if err != nil || si == nil {
		return reconcile.Result{}, err
	}
	svc, err := r.applyDerivedService(ctx, si, imp)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.applySlices(ctx, svc, imp); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.applyStatus(ctx, si, svc, imp, heldClusters)
}

// applyServiceImport creates or updates the ServiceImport; nil when the name is taken by a
// ServiceImport this controller does not manage.
func (r *Reconciler) applyServiceImport(ctx context.Context, key types.NamespacedName, imp *registryv1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	err := r.Client.Get(ctx, key, si)
	if apierrors.IsNotFound(err) {
		si = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ImportLabels(imp), Annotations: ImportAnnotations(imp)},
			Spec:       ImportSpec(imp),
		}
		if err := r.Client.Create(ctx, si); err != nil {
			return nil, fmt.Errorf("create ServiceImport %s: %w", key, err)
		}
		r.write("ServiceImport", "create")
		return si, nil
	}
	if err != nil {
		return nil, err
	}
	if si.Labels[ManagedByLabel] != ManagedBy {
		if !r.AdoptUnmanaged {
			r.mu.Lock()
			seen := r.held["unmanaged"][key]
			r.mu.Unlock()
			if !seen {
				r.Log.Warn("a ServiceImport this controller did not create has the import's name; leaving it alone (--adopt-unmanaged-imports takes it over)", "serviceimport", key.String())
			}
			r.setHeld("unmanaged", key, true)
			return nil, nil
		}
		r.Log.Info("adopting a ServiceImport this controller did not create", "serviceimport", key.String())
	}
	r.setHeld("unmanaged", key, false)
	spec := ImportSpec(imp)
	spec.IPs = si.Spec.IPs // set from the derived Service in applyStatus
	labels, annotations := mergeOwn(si.Labels, ImportLabels(imp), si.Annotations, ImportAnnotations(imp))
	if equality.Semantic.DeepEqual(si.Spec, spec) && maps.Equal(si.Labels, labels) && maps.Equal(si.Annotations, annotations) {
		return si, nil
	}
	// A merge patch, not an update: the cached object may be older than this controller's
	// own last write, and the fields written here are this controller's alone.
	base := si.DeepCopy()
	si.Spec, si.Labels, si.Annotations = spec, labels, annotations
	if err := r.Client.Patch(ctx, si, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("update ServiceImport %s: %w", key, err)
	}
	r.write("ServiceImport", "update")
	return si, nil
}

// mergeOwn returns the metadata to write: the desired labels and annotations replace the
// current ones (the exported ones may have been removed at the source), except keys set by
// Kubernetes itself (kubectl's last-applied annotation and the like are kept).
func mergeOwn(curL, wantL, curA, wantA map[string]string) (map[string]string, map[string]string) {
	l := maps.Clone(wantL)
	a := maps.Clone(wantA)
	for k, v := range curA {
		if _, ok := a[k]; !ok && isSystemKey(k) {
			a[k] = v
		}
	}
	for k, v := range curL {
		if _, ok := l[k]; !ok && isSystemKey(k) {
			l[k] = v
		}
	}
	return l, a
}

func isSystemKey(k string) bool {
	for _, p := range []string{"kubectl.kubernetes.io/", "kubernetes.io/", "k8s.io/"} {
		if len(k) >= len(p) && k[:len(p)] == p {
			return true
		}
	}
	return false
}

func (r *Reconciler) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, imp *registryv1.ServiceImport) (*corev1.Service, error) {
	want := DerivedService(imp)
	if err := controllerutil.SetControllerReference(si, want, r.Client.Scheme()); err != nil {
		return nil, err
	}
	cur := &corev1.Service{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create derived Service %s/%s: %w", want.Namespace, want.Name, err)
		}
		r.write("Service", "create")
		return want, nil
	}
	if err != nil {
		return nil, err
	}
	headlessNow := cur.Spec.ClusterIP == corev1.ClusterIPNone
	if headlessNow != (want.Spec.ClusterIP == corev1.ClusterIPNone) {
		// clusterIP is immutable: the type changed, so the Service is made again.
		if err := r.Client.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		r.write("Service", "delete")
		return nil, errors.New("derived Service type changed; recreating it")
	}
	if equality.Semantic.DeepEqual(cur.Spec.Ports, want.Spec.Ports) && cur.Spec.SessionAffinity == want.Spec.SessionAffinity &&
		equality.Semantic.DeepEqual(cur.Spec.SessionAffinityConfig, want.Spec.SessionAffinityConfig) &&
		maps.Equal(cur.Labels, want.Labels) && metav1.IsControlledBy(cur, si) {
		return cur, nil
	}
	cur.Spec.Ports, cur.Spec.SessionAffinity, cur.Spec.SessionAffinityConfig = want.Spec.Ports, want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	cur.Labels = want.Labels
	cur.OwnerReferences = want.OwnerReferences
	if err := r.Client.Update(ctx, cur); err != nil {
		return nil, fmt.Errorf("update derived Service %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	r.write("Service", "update")
	return cur, nil
}

func (r *Reconciler) applySlices(ctx context.Context, svc *corev1.Service, imp *registryv1.ServiceImport) error {
	want := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range EndpointSlices(imp) {
		if err := controllerutil.SetControllerReference(svc, s, r.Client.Scheme()); err != nil {
			return err
		}
		want[s.Name] = s
	}
	var cur discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &cur, client.InNamespace(svc.Namespace),
		client.MatchingLabels{discoveryv1.LabelManagedBy: ManagedBy, mcsv1beta1.LabelServiceName: imp.GetService().GetName()}); err != nil {
		return err
	}
	var errs []error
	for i := range cur.Items {
		c := &cur.Items[i]
		w, ok := want[c.Name]
		delete(want, c.Name)
		switch {
		case !ok || c.AddressType != w.AddressType:
			if err := r.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			r.write("EndpointSlice", "delete")
			if ok {
				want[c.Name] = w // addressType is immutable: create it again
			}
		case !equality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) || !equality.Semantic.DeepEqual(c.Ports, w.Ports) ||
			!maps.Equal(c.Labels, w.Labels) || !metav1.IsControlledBy(c, svc):
			c.Endpoints, c.Ports, c.Labels, c.OwnerReferences = w.Endpoints, w.Ports, w.Labels, w.OwnerReferences
			if err := r.Client.Update(ctx, c); err != nil {
				errs = append(errs, err)
				continue
			}
			r.write("EndpointSlice", "update")
		}
	}
	for _, w := range want {
		if err := r.Client.Create(ctx, w); err != nil {
			errs = append(errs, err)
			continue
		}
		r.write("EndpointSlice", "create")
	}
	return errors.Join(errs...)
}

func (r *Reconciler) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, svc *corev1.Service, imp *registryv1.ServiceImport, heldClusters []string) error {
	var ips []string
	if imp.GetSpec().GetType() != registryv1.ServiceType_SERVICE_TYPE_HEADLESS && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ips = append(ips, svc.Spec.ClusterIPs...)
	}
	if !equality.Semantic.DeepEqual(si.Spec.IPs, ips) {
		base := si.DeepCopy()
		si.Spec.IPs = ips
		if err := r.Client.Patch(ctx, si, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("set spec.ips of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
		}
		r.write("ServiceImport", "update")
	}
	st := si.Status.DeepCopy()
	st.Clusters = nil
	for _, c := range imp.GetClusters() {
		st.Clusters = append(st.Clusters, mcsv1beta1.ClusterStatus{Cluster: c.GetClusterId()})
	}
	st.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceImportReasonReady),
		Message: fmt.Sprintf("imported from %d cluster(s); derived Service %s", len(imp.GetClusters()), svc.Name), ObservedGeneration: si.Generation,
	})
	meta.SetStatusCondition(&st.Conditions, endpointsHeld(heldClusters, si.Generation))
	if equality.Semantic.DeepEqual(&si.Status, st) {
		return nil
	}
	// The status is this controller's alone: a merge patch cannot fail on a cached
	// resourceVersion older than the last write (a quiet clusterset logs no conflict).
	base := si.DeepCopy()
	si.Status = *st
	if err := r.Client.Status().Patch(ctx, si, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	r.write("ServiceImport", "update")
	return nil
}

// endpointsHeld is the EndpointsHeld condition for the clusters held in an import.
func endpointsHeld(clusters []string, generation int64) metav1.Condition {
	if len(clusters) == 0 {
		return metav1.Condition{Type: ConditionEndpointsHeld, Status: metav1.ConditionFalse, Reason: ReasonNoneHeld,
			Message: "every endpoint is what the registry holds", ObservedGeneration: generation}
	}
	return metav1.Condition{Type: ConditionEndpointsHeld, Status: metav1.ConditionTrue, Reason: ReasonRegistryRestarted,
		Message:            fmt.Sprintf("the registry restarted (or another replica answers) and has not yet received the exports of %s again: their endpoints from before are kept until they do, at most one lease", strings.Join(clusters, ", ")),
		ObservedGeneration: generation}
}

// remove deletes what this controller imported for a Service that no longer has an import,
// after DeletionDelay.
func (r *Reconciler) remove(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	si := &mcsv1beta1.ServiceImport{}
	siErr := r.Client.Get(ctx, key, si)
	if siErr != nil && !apierrors.IsNotFound(siErr) {
		return reconcile.Result{}, siErr
	}
	ownsImport := siErr == nil && si.Labels[ManagedByLabel] == ManagedBy
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(key.Namespace),
		client.MatchingLabels{discoveryv1.LabelManagedBy: ManagedBy, mcsv1beta1.LabelServiceName: key.Name}); err != nil {
		return reconcile.Result{}, err
	}
	derived := &corev1.Service{}
	dErr := r.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: DerivedName(key.Namespace, key.Name)}, derived)
	ownsDerived := dErr == nil && derived.Labels[ManagedByLabel] == ManagedBy
	if !ownsImport && !ownsDerived && len(slices.Items) == 0 {
		r.setHeld("unmanaged", key, false)
		return reconcile.Result{}, nil
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
		r.Log.Info("import removed", "service", key.String())
	}
	return reconcile.Result{}, errors.Join(errs...)
}
