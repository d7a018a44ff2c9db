package exporter

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func cond(t mcsv1beta1.ServiceExportConditionType, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg}
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
