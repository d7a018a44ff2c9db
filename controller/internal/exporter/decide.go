package exporter

import (
	"time"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// exportInput is everything the exporter's decision for one ServiceExport depends on.
type exportInput struct {
	// Session is the registry session's state.
	Session registryclient.State
	// Desired is the export the cluster's objects make now.
	Desired *registryv1.ExportContent
	// Last is what the registry last answered for this Service (nil: nothing sent yet).
	Last *sent
	// Import is the Service's import as the registry's watch last showed it (nil: none).
	Import    *registryv1.ServiceImport
	ClusterID string
	Now       time.Time
	// BatchPeriod spaces the writes of one Service; LimitRetry is how often content the
	// registry refused for a per-cluster limit is sent again.
	BatchPeriod, LimitRetry time.Duration
}

// exportAction is the decision: write Content to the registry (Put), or not; the
// ServiceExport's Ready and Conflict conditions when no write is needed (a write's answer
// decides them after it, with verdict); and when to look again.
type exportAction struct {
	Put     bool
	Content *registryv1.ExportContent
	Requeue time.Duration
	// Ready and Conflict hold when Put is false.
	Ready, Conflict metav1.Condition
}

var unknownConflict = cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionUnknown, string(mcsv1beta1.ServiceExportReasonPending), "waiting for the registry's verdict")

// decideExport is the exporter's decision, a pure function of its input: whether the
// registry must be written and, when not, the conditions. A cluster not registered (or
// whose lease expired) writes nothing; content the registry does not have is sent, at most
// once per BatchPeriod (changes within it wait for the next slot, sending the last one);
// content refused for a limit is sent again every LimitRetry.
func decideExport(in exportInput) exportAction {
	st := in.Session
	cause := func(msg string) string {
		if st.Problem != "" {
			return msg + ": " + st.Problem
		}
		return msg
	}
	if !st.Registered && (!st.Ever || st.LeaseValid) {
		return exportAction{Conflict: unknownConflict, Ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionUnknown,
			string(mcsv1beta1.ServiceExportReasonPending), cause("waiting for the cluster to register with the registry"))}
	}
	if !st.LeaseValid {
		return exportAction{Conflict: unknownConflict, Ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse,
			ReasonClusterLeaseExpired, cause("the cluster's lease in the registry expired: heartbeats are not reaching the registry"))}
	}
	last, content := in.Last, in.Desired
	var requeue time.Duration
	if last != nil && last.generation == st.Generation && !proto.Equal(last.content, content) {
		// At most one write per Service per batch period: endpoint churn, and reconciles
		// woken by the registry's own echo of the last write, wait for the next slot.
		if wait := in.BatchPeriod - in.Now.Sub(last.at); wait > 0 {
			requeue, content = wait, last.content
		}
	}
	retryLimit := last != nil && last.overLimit != "" && in.Now.Sub(last.at) >= in.LimitRetry
	if last == nil || last.generation != st.Generation || !proto.Equal(last.content, content) || retryLimit {
		return exportAction{Put: true, Content: content, Requeue: requeue}
	}
	a := verdict(last, in.Import, in.ClusterID, in.Now, in.LimitRetry)
	if a.Requeue == 0 {
		a.Requeue = requeue
	}
	return a
}

// verdict is what the registry's last answer (and the watch, once it shows that answer's
// write) says of the export: the conditions, and when to send again content refused for a
// limit.
func verdict(last *sent, imp *registryv1.ServiceImport, clusterID string, now time.Time, limitRetry time.Duration) exportAction {
	notExported := cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "not exported")
	if last.overLimit != "" {
		wait := limitRetry - now.Sub(last.at)
		if wait <= 0 {
			wait = limitRetry
		}
		return exportAction{Requeue: wait, Conflict: notExported,
			Ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed),
				"the registry refused the export: "+last.overLimit+"; retrying every "+limitRetry.String())}
	}
	if last.rejected != "" {
		return exportAction{Conflict: notExported,
			Ready: cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed),
				"the registry rejected the export: "+last.rejected)}
	}
	v := last.verdict
	// The import, as the registry's watch last reported it, is newer than the put's verdict
	// when other clusters changed their exports since — once it includes the put: an import
	// without this cluster's last write would flip the condition back and forth.
	if own := entryOf(imp, clusterID); own != nil && !own.GetExportUpdateTime().AsTime().Before(last.written) {
		v = verdictFrom(imp, clusterID)
	} else {
		imp = nil
	}
	return exportAction{
		Ready:    cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonReady), "exported to the registry"),
		Conflict: conflictCondition(v, imp, clusterID)}
}
