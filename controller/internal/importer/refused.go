package importer

import (
	"context"
	"errors"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Names of the ServiceImport condition and Event that tell which source clusters' objects
// the API server refuses (a webhook, a quota, a rule the registry does not check).
const (
	// ConditionEndpointsRefused is True while the API server refuses imported objects of one
	// or more source clusters; the message names each cluster, the object and the API
	// server's answer. The other clusters' endpoints are imported meanwhile.
	ConditionEndpointsRefused = "EndpointsRefused"
	// ReasonAPIServerRefused: EndpointsRefused is True.
	ReasonAPIServerRefused = "APIServerRefused"
	// ReasonNoneRefused: EndpointsRefused is False.
	ReasonNoneRefused = "NoneRefused"
	// EventEndpointsRefused is the Warning Event on the ServiceImport when the API server
	// starts refusing a source cluster's objects.
	EventEndpointsRefused = "EndpointsRefused"
)

const (
	// maxRefusalsListed bounds the clusters named in the condition's message.
	maxRefusalsListed = 5
	// maxRefusalMessage bounds the API server's message quoted for one cluster.
	maxRefusalMessage = 512
)

// Refusal is the API server's refusal of one source cluster's imported object.
type Refusal struct {
	Cluster string
	Object  string // kind namespace/name
	Message string
}

// errRefused is returned by Reconcile while a source cluster's objects are refused, so the
// controller's rate limiter retries the import with a growing delay (no hot loop) after
// its status was written.
var errRefused = errors.New("the API server refuses imported objects of a source cluster")

// isRefusal tells a write the API server refused for what it holds (invalid, forbidden by
// an admission webhook or policy, over a quota, too large) from a transient failure, which
// is retried without blaming a cluster.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsUnsupportedMediaType(err) || apierrors.IsNotAcceptable(err)
}

// apiMessage is the API server's own message of err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

func cutMessage(s string) string {
	if len(s) <= maxRefusalMessage {
		return s
	}
	n := maxRefusalMessage
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// noteRefusals records the refusals of one import: a Warning Event on the ServiceImport for
// each cluster newly refused, and the per-cluster metric. si may be nil (the import left).
func (r *Reconciler) noteRefusals(ctx context.Context, key types.NamespacedName, si *mcsv1beta1.ServiceImport, refused map[string]Refusal) {
	r.mu.Lock()
	if r.refused == nil { // made on first use, as the unit tests build a Reconciler without SetupWithManager
		r.refused = map[string]map[types.NamespacedName]bool{}
	}
	var newly []Refusal
	changed := map[string]bool{}
	for cluster, keys := range r.refused {
		if _, still := refused[cluster]; keys[key] && !still {
			delete(keys, key)
			changed[cluster] = true
		}
	}
	for cluster, f := range refused {
		if r.refused[cluster] == nil {
			r.refused[cluster] = map[types.NamespacedName]bool{}
		}
		if !r.refused[cluster][key] {
			r.refused[cluster][key] = true
			changed[cluster] = true
			newly = append(newly, f)
		}
	}
	counts := map[string]int{}
	for cluster := range changed {
		counts[cluster] = len(r.refused[cluster])
		if counts[cluster] == 0 {
			delete(r.refused, cluster)
		}
	}
	r.mu.Unlock()
	if f := r.Metrics.Refused; f != nil {
		for cluster, n := range counts {
			f(cluster, n)
		}
	}
	for _, f := range newly {
		ctrl.LoggerFrom(ctx).Info("the API server refuses an imported object of a source cluster; the other clusters' endpoints are imported",
			"serviceimport", key.String(), "sourceCluster", f.Cluster, "object", f.Object, "message", f.Message)
		if r.Recorder != nil && si != nil {
			r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, EventEndpointsRefused, "Import",
				"the API server refused %s of source cluster %s: %s", f.Object, f.Cluster, f.Message)
		}
	}
}
