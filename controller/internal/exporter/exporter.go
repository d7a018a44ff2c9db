// Package exporter is the export path of mcs-controller: it sends every ServiceExport of
// the cluster, with its Service's endpoints, to the registry, and sets the ServiceExport's
// Valid, Ready and Conflict conditions from what it observes: the Service, the session, the
// registry's answer and the registry's imports.
package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/importer"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// Names this controller uses on objects.
const (
	// Finalizer keeps a ServiceExport until its export is removed from the registry.
	Finalizer = "multicluster.dynamo.nvidia.com/service-export"
	// ManagedBy is the importer's endpointslice.kubernetes.io/managed-by value: slices
	// carrying it are imports and are never exported again.
	ManagedBy = importer.ManagedBy
	// EventExportFailed is the Warning Event reason when the registry rejects an export.
	EventExportFailed = "ExportFailed"
	// ReasonClusterLeaseExpired is the Ready reason when the cluster's lease is gone.
	ReasonClusterLeaseExpired = "ClusterLeaseExpired"
)

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
	Get(k registryclient.ServiceKey) *registryv1.ServiceImport
}

// Metrics are the exporter's hooks. Any field may be nil.
type Metrics struct {
	// ExportWrite is called after each write to the registry with its outcome.
	ExportWrite func(op string, ok bool)
}

// sent is what the registry last accepted (or refused) for one ServiceExport.
// LimitRetry is how long an export the registry refused for a per-cluster limit waits
// before it is sent again.
const LimitRetry = 30 * time.Second

type sent struct {
	content    *registryv1.ExportContent
	generation int64
	verdict    *registryv1.ExportVerdict
	// written is the stored export's update time a put returned (zero after a sync): an
	// import shows the write once its entry for this cluster is at least that new.
	written time.Time
	// rejected is the registry's INVALID_ARGUMENT message, when it refused the content.
	rejected string
	// overLimit is the registry's RESOURCE_EXHAUSTED message, when the cluster's exports
	// would exceed a limit of the registry: the same content is sent again after
	// LimitRetry, since other exports may have left meanwhile.
	overLimit string
	// at is when it was sent.
	at time.Time
}

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
	Log         *slog.Logger
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
	if name == "" || labels[discoveryv1.LabelManagedBy] == ManagedBy {
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
func (r *Reconciler) Trigger(ctx context.Context, keys []registryclient.ServiceKey) {
	if keys == nil {
		var list mcsv1beta1.ServiceExportList
		if err := r.Client.List(ctx, &list); err != nil {
			r.Log.Warn("list ServiceExports to reconcile", "error", err)
			return
		}
		for _, se := range list.Items {
			keys = append(keys, registryclient.ServiceKey{Namespace: se.Namespace, Name: se.Name})
		}
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
	var slices discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &slices, client.InNamespace(se.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: se.Name}); err != nil {
		return nil, metav1.Condition{}, err
	}
	own := slices.Items[:0]
	for _, s := range slices.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
			own = append(own, s)
		}
	}
	content := &registryv1.ExportContent{
		Service:        &registryv1.ServiceKey{Namespace: se.Namespace, Name: se.Name},
		Spec:           Spec(&svc, se),
		EndpointGroups: EndpointGroups(own),
	}
	return content, cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid), "the Service can be exported"), nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func cond(t mcsv1beta1.ServiceExportConditionType, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg}
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	se := &mcsv1beta1.ServiceExport{}
	if err := r.Client.Get(ctx, req.NamespacedName, se); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !se.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(se, Finalizer) {
			return reconcile.Result{}, nil
		}
		if err := r.deleteExport(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(se, Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, se))
	}
	if controllerutil.AddFinalizer(se, Finalizer) {
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

// export sends content when the registry does not have it yet, and returns the Ready and
// Conflict conditions.
func (r *Reconciler) export(ctx context.Context, key types.NamespacedName, se *mcsv1beta1.ServiceExport, content *registryv1.ExportContent) (ready, conflict metav1.Condition, result reconcile.Result, err error) {
	unknownConflict := cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionUnknown, string(mcsv1beta1.ServiceExportReasonPending), "waiting for the registry's verdict")
	st := r.Session.State()
	// cause ends a message with why the registry could not be reached, when known.
	cause := func(msg string) string {
		if st.Problem != "" {
			return msg + ": " + st.Problem
		}
		return msg
	}
	if !st.Registered {
		if st.Ever && !st.LeaseValid {
			return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, ReasonClusterLeaseExpired,
				cause("the cluster's lease in the registry expired: heartbeats are not reaching the registry")), unknownConflict, reconcile.Result{}, nil
		}
		return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionUnknown, string(mcsv1beta1.ServiceExportReasonPending),
			cause("waiting for the cluster to register with the registry")), unknownConflict, reconcile.Result{}, nil
	}
	if !st.LeaseValid {
		return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, ReasonClusterLeaseExpired,
			cause("the cluster's lease in the registry expired: heartbeats are not reaching the registry")), unknownConflict, reconcile.Result{}, nil
	}
	r.mu.Lock()
	last := r.sent[key]
	r.mu.Unlock()
	if last != nil && last.generation == st.Generation && !proto.Equal(last.content, content) {
		// At most one write per Service per batch period: endpoint churn, and reconciles
		// woken by the registry's own echo of the last write, wait for the next slot.
		if wait := r.BatchPeriod - r.now().Sub(last.at); wait > 0 {
			result = reconcile.Result{RequeueAfter: wait}
			content = last.content
		}
	}
	retryLimit := last != nil && last.overLimit != "" && r.now().Sub(last.at) >= LimitRetry
	if last == nil || last.generation != st.Generation || !proto.Equal(last.content, content) || retryLimit {
		var resp *registryv1.PutExportResponse
		err = r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
			var err error
			resp, err = c.PutExport(ctx, &registryv1.PutExportRequest{
				Clusterset: r.Clusterset, ClusterId: r.ClusterID, Service: content.Service, Spec: content.Spec, EndpointGroups: content.EndpointGroups,
			})
			return err
		})
		if f := r.Metrics.ExportWrite; f != nil {
			f("put", err == nil)
		}
		switch status.Code(err) {
		case codes.OK:
			last = &sent{content: content, generation: st.Generation, verdict: resp.GetVerdict(), written: resp.GetExport().GetUpdateTime().AsTime(), at: r.now()}
		case codes.InvalidArgument:
			msg := status.Convert(err).Message()
			if last == nil || last.rejected != msg {
				r.Recorder.Eventf(se, nil, corev1.EventTypeWarning, EventExportFailed, "Export", "the registry rejected the export: %s", msg)
			}
			last = &sent{content: content, generation: st.Generation, rejected: msg, at: r.now()}
		case codes.ResourceExhausted:
			msg := status.Convert(err).Message()
			if last == nil || last.overLimit != msg {
				r.Recorder.Eventf(se, nil, corev1.EventTypeWarning, EventExportFailed, "Export", "the registry refused the export: %s", msg)
			}
			last = &sent{content: content, generation: st.Generation, overLimit: msg, at: r.now()}
		case codes.FailedPrecondition:
			r.Session.Lost()
			return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, ReasonClusterLeaseExpired,
				"the registry does not hold the cluster's lease; registering again"), unknownConflict, reconcile.Result{}, nil
		default:
			msg := "the registry did not answer; retrying"
			if hint := registryclient.Diagnose(err); hint != "" {
				msg += ": " + hint
			}
			return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionUnknown, string(mcsv1beta1.ServiceExportReasonPending),
				msg), unknownConflict, reconcile.Result{}, fmt.Errorf("put export %s: %w", key, err)
		}
		r.mu.Lock()
		r.sent[key] = last
		r.mu.Unlock()
	}
	if last.overLimit != "" {
		wait := LimitRetry - r.now().Sub(last.at)
		if wait <= 0 {
			wait = LimitRetry
		}
		return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed), "the registry refused the export: "+last.overLimit+"; retrying every "+LimitRetry.String()),
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "not exported"), reconcile.Result{RequeueAfter: wait}, nil
	}
	if last.rejected != "" {
		return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed), "the registry rejected the export: "+last.rejected),
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "not exported"), result, nil
	}
	verdict := last.verdict
	// The import, as the registry's watch last reported it, is newer than the put's verdict
	// when other clusters changed their exports since — once it includes the put: an import
	// without this cluster's last write would flip the condition back and forth.
	imp := r.Imports.Get(registryclient.ServiceKey{Namespace: key.Namespace, Name: key.Name})
	if own := entryOf(imp, r.ClusterID); own != nil && !own.GetExportUpdateTime().AsTime().Before(last.written) {
		verdict = verdictFrom(imp, r.ClusterID)
	} else {
		imp = nil
	}
	return cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonReady), "exported to the registry"),
		conflictCondition(verdict, imp, r.ClusterID), result, nil
}

// entryOf returns the cluster's entry in an import, or nil.
func entryOf(imp *registryv1.ServiceImport, clusterID string) *registryv1.ImportCluster {
	for _, c := range imp.GetClusters() {
		if c.GetClusterId() == clusterID {
			return c
		}
	}
	return nil
}

func verdictFrom(imp *registryv1.ServiceImport, clusterID string) *registryv1.ExportVerdict {
	v := &registryv1.ExportVerdict{WinningClusterId: imp.GetWinningClusterId()}
	for _, c := range imp.GetClusters() {
		if c.GetClusterId() == clusterID {
			v.Participating = true
			v.Conflicts = c.GetConflicts()
			v.MissingPorts, v.ExcludedPorts = c.GetMissingPorts(), c.GetExcludedPorts()
		}
	}
	return v
}

// ConflictReason returns the Kubernetes reason of a conflict: PortConflict for
// CONFLICT_REASON_PORT_CONFLICT.
func ConflictReason(r registryv1.ConflictReason) string {
	words := strings.Split(strings.TrimPrefix(r.String(), "CONFLICT_REASON_"), "_")
	var b strings.Builder
	for _, w := range words {
		switch w {
		case "IP":
			b.WriteString("IP")
		default:
			b.WriteString(w[:1] + strings.ToLower(w[1:]))
		}
	}
	return b.String()
}

// conflictCondition is the Conflict condition of the verdict; imp, when known, names every
// cluster's port differences, else only this cluster's are known.
func conflictCondition(v *registryv1.ExportVerdict, imp *registryv1.ServiceImport, clusterID string) metav1.Condition {
	if len(v.GetConflicts()) == 0 {
		return cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "the exports of this Service agree")
	}
	reasons := make([]string, 0, len(v.GetConflicts()))
	for _, c := range v.GetConflicts() {
		reasons = append(reasons, ConflictReason(c))
	}
	// A condition has one reason: the first in KEP order (ports first); the message lists them all.
	msg := fmt.Sprintf("the exports of this Service disagree (%s); the oldest export, from cluster %s, wins", strings.Join(reasons, ", "), v.GetWinningClusterId())
	clusters := imp.GetClusters()
	if imp == nil {
		clusters = []*registryv1.ImportCluster{{ClusterId: clusterID, MissingPorts: v.GetMissingPorts(), ExcludedPorts: v.GetExcludedPorts()}}
	}
	if d := portDifferences(clusters); d != "" {
		msg += "; ports differ: " + d
	}
	return cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, reasons[0], msg)
}

// portDifferences names, per cluster, the ports of the import its export lacks and the
// ports of its export the import leaves out: "b lacks grpc/TCP/9000; c has http/TCP/81
// (left out)".
func portDifferences(clusters []*registryv1.ImportCluster) string {
	var out []string
	for _, c := range clusters {
		var parts []string
		if m := c.GetMissingPorts(); len(m) > 0 {
			parts = append(parts, "lacks "+portList(m))
		}
		if x := c.GetExcludedPorts(); len(x) > 0 {
			parts = append(parts, "has "+portList(x)+" (left out of the ServiceImport)")
		}
		if len(parts) > 0 {
			out = append(out, c.GetClusterId()+" "+strings.Join(parts, " and "))
		}
	}
	return strings.Join(out, "; ")
}

func portList(ports []*registryv1.ServicePort) string {
	names := make([]string, len(ports))
	for i, p := range ports {
		proto := p.GetProtocol()
		if proto == "" {
			proto = "TCP"
		}
		names[i] = fmt.Sprintf("%s/%s/%d", p.GetName(), proto, p.GetPort())
	}
	return strings.Join(names, ", ")
}

// setConditions writes the conditions when they differ from the object's.
func (r *Reconciler) setConditions(ctx context.Context, se *mcsv1beta1.ServiceExport, conds []metav1.Condition) error {
	base := se.DeepCopy()
	changed := false
	var transitions []metav1.Condition
	for _, c := range conds {
		c.ObservedGeneration = se.Generation
		if old := meta.FindStatusCondition(se.Status.Conditions, c.Type); old == nil || old.Status != c.Status || old.Reason != c.Reason {
			transitions = append(transitions, c)
		}
		if meta.SetStatusCondition(&se.Status.Conditions, c) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	// A merge patch, not an update: the conditions are this controller's alone, and the
	// cached object may be older than its own last write (no conflict error to log).
	if err := r.Client.Status().Patch(ctx, se, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, c := range transitions {
		r.conditionEvent(se, c)
	}
	return nil
}

// conditionEvent records a condition's transition as an Event whose reason is the
// condition's: Warning for a state that needs the user (Valid or Ready False, Conflict
// True), Normal otherwise. Ready=False Failed has its own ExportFailed Event.
func (r *Reconciler) conditionEvent(se *mcsv1beta1.ServiceExport, c metav1.Condition) {
	if r.Recorder == nil || c.Reason == string(mcsv1beta1.ServiceExportReasonFailed) {
		return
	}
	key, state := client.ObjectKeyFromObject(se), string(c.Status)+" "+c.Reason
	r.mu.Lock()
	if r.announced == nil {
		r.announced = map[types.NamespacedName]map[string]string{}
	}
	if r.announced[key] == nil {
		r.announced[key] = map[string]string{}
	}
	seen := r.announced[key][c.Type] == state
	r.announced[key][c.Type] = state
	r.mu.Unlock()
	if seen {
		return
	}
	typ := corev1.EventTypeNormal
	if (c.Type != string(mcsv1beta1.ServiceExportConditionConflict) && c.Status == metav1.ConditionFalse) ||
		(c.Type == string(mcsv1beta1.ServiceExportConditionConflict) && c.Status == metav1.ConditionTrue) {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(se, nil, typ, c.Reason, c.Type, "%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
}

// deleteExport removes the export from the registry when this process sent it, or when it
// may be there from before (the finalizer path always asks the registry).
func (r *Reconciler) deleteExport(ctx context.Context, key types.NamespacedName) error {
	err := r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		_, err := c.DeleteExport(ctx, &registryv1.DeleteExportRequest{
			Clusterset: r.Clusterset, ClusterId: r.ClusterID, Service: &registryv1.ServiceKey{Namespace: key.Namespace, Name: key.Name},
		})
		return err
	})
	if f := r.Metrics.ExportWrite; f != nil {
		f("delete", err == nil)
	}
	if status.Code(err) == codes.FailedPrecondition {
		// The registry does not hold the cluster's lease: register again, then retry.
		r.Session.Lost()
	}
	if err != nil {
		return fmt.Errorf("delete export %s from the registry: %w", key, err)
	}
	r.forget(key)
	return nil
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.sent, key)
	delete(r.announced, key)
	r.mu.Unlock()
}

// SyncAll makes the registry hold exactly the cluster's valid exports: it compares them
// with the registry's copy and, when they differ, sends them all in one SyncExports call.
// The session calls it after every registration and periodically to verify.
func (r *Reconciler) SyncAll(ctx context.Context, generation int64) error {
	var list mcsv1beta1.ServiceExportList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list ServiceExports: %w", err)
	}
	req := &registryv1.SyncExportsRequest{Clusterset: r.Clusterset, ClusterId: r.ClusterID}
	keys := map[int]types.NamespacedName{}
	for i := range list.Items {
		se := &list.Items[i]
		if !se.DeletionTimestamp.IsZero() {
			continue
		}
		content, _, err := r.desired(ctx, se)
		if err != nil {
			return err
		}
		if content == nil {
			continue
		}
		keys[len(req.Exports)] = client.ObjectKeyFromObject(se)
		req.Exports = append(req.Exports, content)
	}
	if verdicts, same, err := r.registryHas(ctx, req.Exports); err != nil {
		r.Log.Warn("could not compare the exports with the registry's; sending them all", "error", err)
	} else if same {
		// A controller restart or a new leader: the registry already holds exactly these
		// exports, so nothing is written.
		r.mu.Lock()
		r.sent = map[types.NamespacedName]*sent{}
		for i, content := range req.Exports {
			r.sent[keys[i]] = &sent{content: content, generation: generation, verdict: verdicts[keys[i]]}
		}
		verifying := r.syncedGen == generation
		r.syncedGen = generation
		r.mu.Unlock()
		if verifying {
			// A periodic check found nothing missing.
			r.Log.Debug("the registry holds the cluster's exports", "exports", len(req.Exports))
			return nil
		}
		r.Log.Info("the registry holds the cluster's exports already; nothing sent", "exports", len(req.Exports))
		go r.Trigger(ctx, nil)
		return nil
	}
	var resp *registryv1.SyncExportsResponse
	err := r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		resp, err = c.SyncExports(ctx, req)
		return err
	})
	if f := r.Metrics.ExportWrite; f != nil {
		f("sync", err == nil)
	}
	if err != nil {
		// A rejected export, or a set over one of the registry's limits, fails the whole
		// sync; the reconciles that follow send each export alone, so only the bad ones
		// (or those past the limit) are refused.
		if c := status.Code(err); c == codes.InvalidArgument || c == codes.ResourceExhausted {
			r.Log.Warn("the registry rejected the export set; sending the exports one by one", "error", err)
			r.mu.Lock()
			r.sent = map[types.NamespacedName]*sent{}
			r.mu.Unlock()
			go r.Trigger(ctx, nil)
			return nil
		}
		return fmt.Errorf("sync %d exports: %w", len(req.Exports), err)
	}
	r.mu.Lock()
	r.syncedGen = generation
	r.sent = map[types.NamespacedName]*sent{}
	for i, res := range resp.GetResults() {
		r.sent[keys[i]] = &sent{content: req.Exports[i], generation: generation, verdict: res.GetVerdict()}
	}
	r.mu.Unlock()
	r.Log.Info("exports sent to the registry", "exports", len(req.Exports), "deleted_stale", resp.GetDeletedExports())
	go r.Trigger(ctx, nil)
	return nil
}

// registryHas reports whether the registry holds exactly these exports of this cluster, and
// if so the registry's verdict on each.
func (r *Reconciler) registryHas(ctx context.Context, want []*registryv1.ExportContent) (map[types.NamespacedName]*registryv1.ExportVerdict, bool, error) {
	var exports *registryv1.ListExportsResponse
	var imports *registryv1.ListImportsResponse
	err := r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		exports, err = c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: r.Clusterset, ClusterId: r.ClusterID, IncludeEndpoints: true})
		if err != nil {
			return err
		}
		imports, err = c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: r.Clusterset})
		return err
	})
	if registryclient.ClustersetUnknown(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(exports.GetExports()) != len(want) {
		return nil, false, nil
	}
	have := map[types.NamespacedName]*registryv1.Export{}
	for _, e := range exports.GetExports() {
		have[types.NamespacedName{Namespace: e.GetService().GetNamespace(), Name: e.GetService().GetName()}] = e
	}
	for _, w := range want {
		e := have[types.NamespacedName{Namespace: w.GetService().GetNamespace(), Name: w.GetService().GetName()}]
		if e == nil || !proto.Equal(e.GetSpec(), w.GetSpec()) || !slices.EqualFunc(e.GetEndpointGroups(), w.GetEndpointGroups(), equalMsg[*registryv1.EndpointGroup]) {
			return nil, false, nil
		}
	}
	verdicts := map[types.NamespacedName]*registryv1.ExportVerdict{}
	for _, imp := range imports.GetImports() {
		k := types.NamespacedName{Namespace: imp.GetService().GetNamespace(), Name: imp.GetService().GetName()}
		if have[k] != nil {
			verdicts[k] = verdictFrom(imp, r.ClusterID)
		}
	}
	return verdicts, true, nil
}

func equalMsg[M proto.Message](a, b M) bool { return proto.Equal(a, b) }
