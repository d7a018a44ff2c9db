package exporter

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// sent is what the registry last accepted (or refused) for one ServiceExport.
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

// export carries out decideExport for one ServiceExport: it sends the content when the
// decision says so, records the registry's answer, and returns the Ready and Conflict
// conditions.
func (r *Reconciler) export(ctx context.Context, key types.NamespacedName, se *mcsv1beta1.ServiceExport, content *registryv1.ExportContent) (ready, conflict metav1.Condition, result reconcile.Result, err error) {
	st := r.Session.State()
	r.mu.Lock()
	last := r.sent[key]
	r.mu.Unlock()
	imp := r.Imports.Get(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
	a := decideExport(exportInput{Session: st, Desired: content, Last: last, Import: imp, ClusterID: r.ClusterID,
		Now: r.now(), BatchPeriod: r.BatchPeriod, LimitRetry: LimitRetry})
	if !a.Put {
		return a.Ready, a.Conflict, reconcile.Result{RequeueAfter: a.Requeue}, nil
	}
	next, failed := r.put(ctx, se, last, a.Content, st.Generation)
	if failed != nil {
		return failed.ready, unknownConflict, reconcile.Result{}, failed.err
	}
	r.mu.Lock()
	r.sent[key] = next
	r.mu.Unlock()
	// The watch may already show the write: read the import again.
	imp = r.Imports.Get(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
	v := verdict(next, imp, r.ClusterID, r.now(), LimitRetry)
	if v.Requeue == 0 {
		v.Requeue = a.Requeue
	}
	return v.Ready, v.Conflict, reconcile.Result{RequeueAfter: v.Requeue}, nil
}

// putFailed is a put the registry did not settle: Ready says why, and err (when set) is
// retried.
type putFailed struct {
	ready metav1.Condition
	err   error
}

// put sends content with PutExport and returns what the registry's answer makes the
// export's record: accepted, rejected (INVALID_ARGUMENT) or over a limit
// (RESOURCE_EXHAUSTED), each with its ExportFailed Event once per message; or, when the
// registry did not hold the cluster's lease or did not answer, no record and why.
func (r *Reconciler) put(ctx context.Context, se *mcsv1beta1.ServiceExport, last *sent, content *registryv1.ExportContent, generation int64) (*sent, *putFailed) {
	var resp *registryv1.PutExportResponse
	err := r.Registry.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		resp, err = c.PutExport(ctx, &registryv1.PutExportRequest{
			Clusterset: r.Clusterset, ClusterId: r.ClusterID, Service: content.Service, Spec: content.Spec, EndpointGroups: content.EndpointGroups,
		})
		return err
	})
	if f := r.Metrics.ExportWrite; f != nil {
		f("put", err == nil)
	}
	code := status.Code(err)
	_, throttled := registryclient.RetryDelay(err)
	if throttled {
		// Over this cluster's share of the registry even after its retry hints: not a
		// refusal of the export; sent again like a call the registry did not answer.
		code = codes.Unavailable
	}
	switch code {
	case codes.OK:
		return &sent{content: content, generation: generation, verdict: resp.GetVerdict(), written: resp.GetExport().GetUpdateTime().AsTime(), at: r.now()}, nil
	case codes.InvalidArgument:
		msg := status.Convert(err).Message()
		if last == nil || last.rejected != msg {
			r.Recorder.Eventf(se, nil, corev1.EventTypeWarning, EventExportFailed, "Export", "the registry rejected the export: %s", msg)
		}
		return &sent{content: content, generation: generation, rejected: msg, at: r.now()}, nil
	case codes.ResourceExhausted:
		msg := status.Convert(err).Message()
		if last == nil || last.overLimit != msg {
			r.Recorder.Eventf(se, nil, corev1.EventTypeWarning, EventExportFailed, "Export", "the registry refused the export: %s", msg)
		}
		return &sent{content: content, generation: generation, overLimit: msg, at: r.now()}, nil
	case codes.FailedPrecondition:
		r.Session.Lost()
		return nil, &putFailed{ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, ReasonClusterLeaseExpired,
			"the registry does not hold the cluster's lease; registering again")}
	default:
		msg := "the registry did not answer; retrying"
		if throttled {
			msg = "the registry refuses more calls from this cluster for now (its share of the registry, --client-rate); retrying"
		}
		if hint := registryclient.Diagnose(err); hint != "" {
			msg += ": " + hint
		}
		return nil, &putFailed{ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionUnknown, string(mcsv1beta1.ServiceExportReasonPending), msg),
			err: fmt.Errorf("put export %s/%s: %w", se.Namespace, se.Name, err)}
	}
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
