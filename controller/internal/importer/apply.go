package importer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// applyServiceImport creates or updates the ServiceImport; nil when the name is taken by a
// ServiceImport this controller does not manage.
func (r *Reconciler) applyServiceImport(ctx context.Context, key types.NamespacedName, d Desired) (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	err := r.Client.Get(ctx, key, si)
	if apierrors.IsNotFound(err) {
		si = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: d.Labels, Annotations: d.Annotations},
			Spec:       *d.Spec.DeepCopy(),
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
	if si.Labels[names.ManagedByLabel] != names.ManagedBy {
		if !r.AdoptUnmanaged {
			r.mu.Lock()
			seen := r.held["unmanaged"][key]
			r.mu.Unlock()
			if !seen {
				ctrl.LoggerFrom(ctx).Info("a ServiceImport this controller did not create has the import's name; leaving it alone (--adopt-unmanaged-imports takes it over)", "serviceimport", key.String())
			}
			r.setHeld("unmanaged", key, true)
			return nil, nil
		}
		ctrl.LoggerFrom(ctx).Info("adopting a ServiceImport this controller did not create", "serviceimport", key.String())
	}
	r.setHeld("unmanaged", key, false)
	spec := *d.Spec.DeepCopy()
	spec.IPs = si.Spec.IPs // set from the derived Service in applyStatus
	labels, annotations := mergeOwn(si.Labels, d.Labels, si.Annotations, d.Annotations)
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

func (r *Reconciler) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, d Desired) (*corev1.Service, error) {
	want := d.Service.DeepCopy()
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
		maps.Equal(cur.Labels, want.Labels) && metav1.IsControlledBy(cur, si) &&
		cur.Annotations[TopologyModeAnnotation] == want.Annotations[TopologyModeAnnotation] {
		return cur, nil
	}
	cur.Spec.Ports, cur.Spec.SessionAffinity, cur.Spec.SessionAffinityConfig = want.Spec.Ports, want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	cur.Labels = want.Labels
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[TopologyModeAnnotation] = want.Annotations[TopologyModeAnnotation]
	cur.OwnerReferences = want.OwnerReferences
	if err := r.Client.Update(ctx, cur); err != nil {
		return nil, fmt.Errorf("update derived Service %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	r.write("Service", "update")
	return cur, nil
}

// sliceWriters bounds the slice writes of one import that run at once (an import's
// reconcile; --import-workers bounds how many run).
const sliceWriters = 4

// applySlices writes the plan of the import's slices. A write the API server refuses for
// good (see refusal) costs only the source cluster whose slice it is: the other clusters'
// slices are still written, and the refusals are returned by source cluster for the
// ServiceImport's status. A slice to delete whose source cluster keep (when not nil) holds
// is left in place; kept names those clusters. err holds the other failures (transient:
// retried).
func (r *Reconciler) applySlices(ctx context.Context, svc *corev1.Service, d Desired, keep func(cluster string) bool) (refused map[string]Refusal, kept []string, err error) {
	want := d.Slices
	for _, s := range want {
		if err := controllerutil.SetControllerReference(svc, s, r.Client.Scheme()); err != nil {
			return nil, nil, err
		}
	}
	var cur discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &cur, client.InNamespace(svc.Namespace),
		client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy, mcsv1beta1.LabelServiceName: d.Service.Labels[mcsv1beta1.LabelServiceName]}); err != nil {
		return nil, nil, err
	}
	plan := PlanSlices(cur.Items, want, svc)
	var (
		mu   sync.Mutex // guards errs and refused: updates and creates run side by side
		errs []error
	)
	failed := func(s *discoveryv1.EndpointSlice, err error) {
		mu.Lock()
		defer mu.Unlock()
		if !isRefusal(err) {
			errs = append(errs, err)
			return
		}
		cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
		if refused == nil {
			refused = map[string]Refusal{}
		}
		// One refusal per cluster: its first slice by name, whatever order the writes end in.
		object := "EndpointSlice " + s.Namespace + "/" + s.Name
		if prev, seen := refused[cluster]; !seen || object < prev.Object {
			refused[cluster] = Refusal{Cluster: cluster, Object: object, Message: cutMessage(apiMessage(err))}
		}
	}
	stillThere := map[string]bool{} // a failed delete: its replacement waits for the retry
	for _, c := range plan.Delete {
		if cluster := c.Labels[mcsv1beta1.LabelSourceCluster]; keep != nil && keep(cluster) {
			if !slices.Contains(kept, cluster) {
				kept = append(kept, cluster)
			}
			continue
		}
		if err := r.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			failed(c, err)
			stillThere[c.Name] = true
			continue
		}
		r.write("EndpointSlice", "delete")
	}
	// The slices of one import are independent objects: a tier change writes the slices of
	// two source clusters, a large import ten or more, and each write waits for the API
	// server. They go side by side, a few at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, sliceWriters)
	write := func(s *discoveryv1.EndpointSlice, op string, do func() error) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := do(); err != nil {
				failed(s, err)
				return
			}
			r.write("EndpointSlice", op)
		}()
	}
	for _, u := range plan.Update {
		write(u, "update", func() error { return r.Client.Update(ctx, u) })
	}
	for _, w := range plan.Create {
		if stillThere[w.Name] {
			continue
		}
		write(w, "create", func() error { return r.Client.Create(ctx, w) })
	}
	wg.Wait()
	slices.Sort(kept)
	return refused, kept, errors.Join(errs...)
}

func (r *Reconciler) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, svc *corev1.Service, d Desired, held kept, refused map[string]Refusal) error {
	var ips []string
	if !d.Headless && svc.Spec.ClusterIP != corev1.ClusterIPNone {
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
	st.Clusters = statusClusters(d.Clusters, held)
	st.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	meta.SetStatusCondition(&st.Conditions, ready(d.Clusters, refused, svc.Name, si.Generation))
	meta.SetStatusCondition(&st.Conditions, endpointsHeld(held, si.Generation))
	meta.SetStatusCondition(&st.Conditions, replicationHeld(d.ReplicationHeld, si.Generation))
	meta.SetStatusCondition(&st.Conditions, endpointsRefused(refused, si.Generation))
	meta.SetStatusCondition(&st.Conditions, localityCondition(d.Locality, si.Generation))
	return r.patchStatus(ctx, si, st)
}

// patchStatus writes st as the ServiceImport's status when it differs. The status is this
// controller's alone: a merge patch cannot fail on a cached resourceVersion older than the
// last write (a quiet clusterset logs no conflict).
func (r *Reconciler) patchStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, st *mcsv1beta1.ServiceImportStatus) error {
	if equality.Semantic.DeepEqual(&si.Status, st) {
		return nil
	}
	base := si.DeepCopy()
	si.Status = *st
	if err := r.Client.Status().Patch(ctx, si, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	r.write("ServiceImport", "update")
	return nil
}

// statusClusters lists the import's clusters and the held ones, sorted.
func statusClusters(clusters []string, held kept) []mcsv1beta1.ClusterStatus {
	all := append(slices.Clone(clusters), held.clusters()...)
	slices.Sort(all)
	var out []mcsv1beta1.ClusterStatus
	for _, c := range slices.Compact(all) {
		out = append(out, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	return out
}

// endpointsHeld is the EndpointsHeld condition for the clusters an import keeps.
func endpointsHeld(held kept, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionEndpointsHeld, Status: metav1.ConditionTrue, ObservedGeneration: generation}
	switch {
	case len(held.refill) > 0:
		c.Reason = ReasonRegistryRestarted
		c.Message = fmt.Sprintf("the registry restarted (or another replica answers) and has not yet received the exports of %s again: their endpoints from before are kept until they do, at most one lease", strings.Join(held.refill, ", "))
		if len(held.delayed) > 0 {
			c.Message += fmt.Sprintf("; those of %s for --import-deletion-delay", strings.Join(held.delayed, ", "))
		}
	case len(held.delayed) > 0:
		c.Reason = ReasonDeletionDelayed
		c.Message = fmt.Sprintf("%s left the import: their endpoints are kept for --import-deletion-delay", strings.Join(held.delayed, ", "))
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNoneHeld, "every endpoint is what the registry holds"
	}
	return c
}

// replicationHeld is the ReplicationHeld condition for the clusters the registry holds
// while replication lags.
func replicationHeld(held []HeldCluster, generation int64) metav1.Condition {
	if len(held) == 0 {
		return metav1.Condition{Type: ConditionReplicationHeld, Status: metav1.ConditionFalse, Reason: ReasonNoneHeld,
			Message: "the lease of every source cluster is active", ObservedGeneration: generation}
	}
	names := make([]string, len(held))
	for i, h := range held {
		names[i] = fmt.Sprintf("%s (renewed through region %s)", h.ClusterID, h.Region)
	}
	return metav1.Condition{Type: ConditionReplicationHeld, Status: metav1.ConditionTrue, Reason: ReasonReplicationLagging,
		Message: fmt.Sprintf("the registry holds %s: the lease expired in its view while replication from that region lags; the endpoints are kept until replication catches up, at most the registry's --replication-stall-hold",
			strings.Join(names, ", ")),
		ObservedGeneration: generation}
}

// ready is the Ready condition: True while the endpoints of at least one source cluster (or
// of none, before any cluster has endpoints) are imported; its message names the clusters
// whose endpoints the API server refuses.
func ready(clusters []string, refused map[string]Refusal, derived string, generation int64) metav1.Condition {
	c := metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), ObservedGeneration: generation,
		Message: fmt.Sprintf("imported from %d cluster(s); derived Service %s", len(clusters), derived)}
	if len(refused) == 0 {
		return c
	}
	ids := strings.Join(refusedClusters(refused), ", ")
	if len(refused) >= len(clusters) {
		c.Status, c.Reason = metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonPending)
		c.Message = fmt.Sprintf("the API server refuses the endpoints of every source cluster (%s); see %s", ids, ConditionEndpointsRefused)
		return c
	}
	c.Message = fmt.Sprintf("imported from %d of %d cluster(s); derived Service %s; the API server refuses the endpoints of %s (see %s)",
		len(clusters)-len(refused), len(clusters), derived, ids, ConditionEndpointsRefused)
	return c
}

// endpointsRefused is the EndpointsRefused condition: which source clusters' objects the API
// server refuses, with the object and the API server's message for each.
func endpointsRefused(refused map[string]Refusal, generation int64) metav1.Condition {
	if len(refused) == 0 {
		return metav1.Condition{Type: ConditionEndpointsRefused, Status: metav1.ConditionFalse, Reason: ReasonNoneRefused,
			Message: "the API server accepts the endpoints of every source cluster", ObservedGeneration: generation}
	}
	var parts []string
	for i, name := range refusedClusters(refused) {
		if i == maxRefusalsListed {
			parts = append(parts, fmt.Sprintf("and %d more cluster(s)", len(refused)-i))
			break
		}
		f := refused[name]
		parts = append(parts, fmt.Sprintf("cluster %s: %s: %s", f.Cluster, f.Object, f.Message))
	}
	return metav1.Condition{Type: ConditionEndpointsRefused, Status: metav1.ConditionTrue, Reason: ReasonAPIServerRefused,
		Message:            "the API server refuses the imported endpoints of " + strings.Join(parts, "; ") + "; the other clusters' endpoints are imported",
		ObservedGeneration: generation}
}

func refusedClusters(refused map[string]Refusal) []string {
	return slices.Sorted(maps.Keys(refused))
}
