// Package importer is the import path of mcs-controller: for every import of the
// clusterset it writes a ServiceImport, its derived Service and the imported EndpointSlices
// into the cluster, and removes them when the import goes. It writes only what differs.
package importer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// Imports is what the importer reads of the registry's watch: the imports as the registry
// holds them, and whether it refills.
type Imports interface {
	Get(k types.NamespacedName) *registryv1.ServiceImport
	Keys() []types.NamespacedName
	Synced() bool
	// RefillUntil is until when a source cluster missing from the imports may still send
	// its exports again to a registry that refills; zero when it is not awaited (see
	// registryclient.ImportWatch). The importer keeps its objects until then (the hold).
	RefillUntil(cluster string) time.Time
}

// Names of the ServiceImport condition this controller adds to the mcs-api ones.
const (
	// ConditionEndpointsHeld is True while the cluster keeps the endpoints of source
	// clusters the import no longer lists (the hold, see holdEnd): from before the
	// registry restarted (or another replica answered), until those clusters send their
	// exports again or their lease would have expired; or for --import-deletion-delay.
	ConditionEndpointsHeld = "EndpointsHeld"
	// ReasonRegistryRestarted: EndpointsHeld is True while the registry refills.
	ReasonRegistryRestarted = "RegistryRestarted"
	// ReasonDeletionDelayed: EndpointsHeld is True for --import-deletion-delay alone.
	ReasonDeletionDelayed = "DeletionDelayed"
	// ReasonNoneHeld: EndpointsHeld is False (every endpoint is what the registry holds),
	// or ReplicationHeld is False (the lease of every source cluster is active).
	ReasonNoneHeld = "NoneHeld"
	// ConditionReplicationHeld is True while the registry holds source clusters whose lease
	// expired in its region's view because replication from the region of their last
	// renewal lags (LEASE_STATE_HELD_REPLICATION); the message names them and the region.
	ConditionReplicationHeld = "ReplicationHeld"
	// ReasonReplicationLagging: ReplicationHeld is True.
	ReasonReplicationLagging = "ReplicationLagging"
)

// Canary takes the canary import once it is written into the cluster.
type Canary interface {
	Key() types.NamespacedName
	Applied(imp *registryv1.ServiceImport)
}

// Metrics are the importer's hooks. Any field may be nil.
type Metrics struct {
	// Write is called for each write to the API server: kind (ServiceImport, Service,
	// EndpointSlice, Namespace) and op (create, update, delete).
	Write func(kind, op string)
	// Held reports the number of imports held, by reason: namespace_missing and
	// unmanaged (not written), registry_restart and deletion_delay (keeping the objects
	// of source clusters they no longer list).
	Held func(reason string, n int)
	// HeldClusters reports how many source clusters any import keeps while the registry
	// refills.
	HeldClusters func(n int)
	// Refused reports the number of imports in which the API server refuses objects of a
	// source cluster.
	Refused func(sourceCluster string, n int)
	// Tier reports an import's active locality tier (cluster, region, any); changed is
	// false for the first report of the import.
	Tier func(namespace, name, tier string, changed bool)
	// TierGone reports that an import was removed.
	TierGone func(namespace, name string)
}

// Config is what a Reconciler is made with.
type Config struct {
	Client  client.Client
	Imports Imports
	// WatchNamespaces limits imports to these namespaces; empty: all.
	WatchNamespaces []string
	// CreateNamespaces creates a missing namespace instead of holding the import.
	CreateNamespaces bool
	// AdoptUnmanaged takes over ServiceImports this controller did not create.
	AdoptUnmanaged bool
	// DeletionDelay keeps the objects of a source cluster this long after the importer
	// found it missing from an import (--import-deletion-delay), for operators who want a
	// removed import to linger; a registry restart needs none (the hold keeps what comes
	// back). 0: delete at once.
	DeletionDelay time.Duration
	// Workers is how many ServiceImports are reconciled at once (--import-workers).
	Workers int
	Metrics Metrics
	// Recorder records the EndpointsRefused Events; nil records none.
	Recorder recorder.EventRecorder
	// Canary, when set, is told of the import Canary.Key once its slices are written
	// (package canary measures propagation from it).
	Canary Canary
	// ClusterID and Region are the importing cluster's: the locality tiers compare the
	// source clusters with them.
	ClusterID, Region string
	// DefaultLocality is the policy of imports whose exports set none (--default-locality).
	DefaultLocality []registryv1.LocalityTier
}

// Reconciler applies imports. Requests are namespace/name of the exported Service. Make it
// with New: its state (the holds, the held and refused imports, the locality tiers) lives
// in the leader's memory only; a new leader starts with none and finds it again from the
// registry's imports and the cluster (docs/configuration.md, "The hold after a registry
// restart").
type Reconciler struct {
	Config

	holds   *holds
	mu      sync.Mutex
	held    map[string]map[types.NamespacedName]bool
	refused map[string]map[types.NamespacedName]bool // by source cluster
	tiers   map[types.NamespacedName]string          // the active locality tier by import
	// topoMu guards topo, the nodes' zones as last read, across its read: a reconcile
	// that finds it stale reads it while the others wait, rather than see a half-made one.
	topoMu sync.Mutex
	topo   Topology
	// topoFresh: topo is what the cache holds; a Node event clears it.
	topoFresh atomic.Bool
	events    chan event.GenericEvent
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

// New returns a Reconciler with cfg and its own state.
func New(cfg Config) *Reconciler {
	return &Reconciler{
		Config: cfg,
		holds:  newHolds(),
		held:   map[string]map[types.NamespacedName]bool{"namespace_missing": {}, "unmanaged": {}, "registry_restart": {}, "deletion_delay": {}},
		events: make(chan event.GenericEvent, 4096),
		tiers:  map[types.NamespacedName]string{},
	}
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byServiceLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[mcsv1beta1.LabelServiceName]
		if name == "" || (o.GetLabels()[names.ManagedByLabel] != names.ManagedBy && o.GetLabels()[discoveryv1.LabelManagedBy] != names.ManagedBy) {
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
		// A node's zone decides the hints of every import: a change of the zones
		// reconciles them all. Metadata only: the zone is a label.
		WatchesMetadata(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			r.nodesChanged()
			keys := r.Imports.Keys()
			out := make([]reconcile.Request, 0, len(keys))
			for _, k := range keys {
				out = append(out, reconcile.Request{NamespacedName: k})
			}
			return out
		}), builder.WithPredicates(zoneChanged)).
		WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Trigger queues the Services whose import changed.
func (r *Reconciler) Trigger(ctx context.Context, keys []types.NamespacedName) {
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
	if err := r.Client.List(ctx, &imports, client.MatchingLabels{names.ManagedByLabel: names.ManagedBy}); err != nil {
		return fmt.Errorf("list ServiceImports: %w", err)
	}
	for _, si := range imports.Items {
		keys = append(keys, types.NamespacedName{Namespace: si.Namespace, Name: si.Name})
	}
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy}); err != nil {
		return fmt.Errorf("list EndpointSlices: %w", err)
	}
	for _, s := range slices.Items {
		keys = append(keys, types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[mcsv1beta1.LabelServiceName]})
	}
	ctrl.LoggerFrom(ctx).Info("import resync", "keys", len(keys))
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

// conflictRetry is how soon an import written from a stale cache is reconciled again.
const conflictRetry = 200 * time.Millisecond

// Reconcile implements reconcile.Reconciler. A write refused because the cached object was
// older than this controller's own last write (a conflict; after a tier change or an
// upgrade, several writes follow each other) is no error: the cache is about to catch up,
// and the import is reconciled again from it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil && onlyConflicts(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("an imported object changed since the cache read it; reconciling again", "error", err.Error())
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}

// onlyConflicts reports whether every error joined in err is an API conflict.
func onlyConflicts(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		for _, e := range errs {
			if !onlyConflicts(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	return apierrors.IsConflict(err)
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) || req.Name == "" {
		return reconcile.Result{}, nil
	}
	if !r.Imports.Synced() {
		// Without the registry's snapshot every import would look gone.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	key := types.NamespacedName{Namespace: req.Namespace, Name: req.Name}
	imp := r.Imports.Get(key)
	if imp == nil {
		r.setHeld("namespace_missing", req.NamespacedName, false)
		r.noteRefusals(ctx, key, nil, nil)
		return r.remove(ctx, req.NamespacedName)
	}

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
		ctrl.LoggerFrom(ctx).Info("created the namespace of an import", "namespace", req.Namespace)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	r.setHeld("namespace_missing", req.NamespacedName, false)

	d := DesiredFor(imp)
	topo, err := r.topology(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	d.Localize(imp, r.DefaultLocality, r.ClusterID, r.Region, topo)
	si, err := r.applyServiceImport(ctx, req.NamespacedName, d)
	if err != nil || si == nil {
		return reconcile.Result{}, err
	}
	svc, err := r.applyDerivedService(ctx, si, d)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The status is written whatever happened to the slices: a source cluster whose objects
	// the API server refuses is named there and costs no other cluster its endpoints, and a
	// first import still gets its spec.ips.
	now := time.Now()
	keep := func(cluster string) bool {
		return !slices.Contains(d.Clusters, cluster) && r.keep(key, cluster, now)
	}
	refused, kept, sliceErr := r.applySlices(ctx, svc, d, keep)
	held := r.settleHolds(key, kept, now)
	if sliceErr == nil && r.Canary != nil && key == r.Canary.Key() {
		r.Canary.Applied(imp) // the slices are in: the moment a consumer could see them
	}
	// The metric and Events before the status, so a reader who sees the condition clear
	// finds the metric cleared too.
	r.noteRefusals(ctx, key, si, refused)
	statusErr := r.applyStatus(ctx, si, svc, d, held, refused)
	if sliceErr == nil && statusErr == nil {
		r.noteTier(key, si, d.Locality)
	}
	if err := errors.Join(sliceErr, statusErr); err != nil {
		return reconcile.Result{}, err
	}

	if len(refused) > 0 {
		return reconcile.Result{}, errRefused
	}
	return reconcile.Result{RequeueAfter: held.next}, nil
}

// ImportsChanged reconciles the Services whose import changed (the import watch's
// listener), and those that keep a cluster the registry's refill no longer awaits.
func (r *Reconciler) ImportsChanged(ctx context.Context, keys []types.NamespacedName) {
	r.Trigger(ctx, append(keys, r.holds.returned(r.Imports.RefillUntil)...))
}
