// Package canary measures, all the time, how long an export takes to reach this cluster
// from every other member cluster (the propagation SLO), without trusting the clusters'
// clocks.
//
// Each controller exports a canary Service whose one endpoint's hostname carries a stamp:
// the registry's time when the controller wrote it, which the controller knows from the
// offset its session measures on every lease renewal (the registry's renew time against
// the middle of the round trip). Every other controller, once it has written that
// endpoint into its own cluster, takes the registry's time by its own offset and
// subtracts the stamp. Only registry clocks (servers, NTP) meet; a cluster's skewed
// clock cancels out through its own offset.
package canary

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

const (
	// ServiceName is the canary Service every controller exports, in its own namespace.
	ServiceName = "mcs-canary"
	// ManagedBy marks the canary's EndpointSlice (the exporter sends it as any slice).
	ManagedBy = "mcs-canary.multicluster.dynamo.nvidia.com"
	// SummaryAnnotation on the canary ServiceExport holds this cluster's figures, for
	// mcs-admin diagnose: "<source> p50=<s> p99=<s> n=<samples>", one per source cluster,
	// separated by "; ".
	SummaryAnnotation = "multicluster.dynamo.nvidia.com/propagation"
	// stampPrefix starts the endpoint hostname; the rest is the registry's time in ms.
	stampPrefix = "t"
	// address is the canary endpoint's address (TEST-NET-1: never routed).
	address = "192.0.2.1"
	// kept samples per source cluster for the summary.
	kept = 100
	// maxSources bounds the sources a recorder keeps.
	maxSources = 1000
)

// Clock is the registry's clock as this controller's session measures it.
type Clock interface {
	RegistryNow() (time.Time, bool)
}

// Writer keeps the canary Service, ServiceExport and EndpointSlice in Namespace and
// stamps the endpoint every Interval. It runs on the leader.
type Writer struct {
	Client client.Client
	// Reader reads without the cache, which may not watch the canary's namespace.
	Reader    client.Reader
	Namespace string
	ClusterID string
	Interval  time.Duration
	Clock     Clock
	Recorder  *Recorder
	Log       *slog.Logger

	// ensured: the Service and ServiceExport exist; slice: the last written slice.
	ensured bool
	slice   *discoveryv1.EndpointSlice
}

// Run writes the canary until ctx ends.
func (w *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		if err := w.write(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("canary", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *Writer) write(ctx context.Context) error {
	if _, ok := w.Clock.RegistryNow(); !ok {
		return nil // no renewal yet: nothing to stamp with
	}
	if !w.ensured {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: ServiceName},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "canary", Protocol: corev1.ProtocolTCP, Port: 9}}}}
		if err := createIfMissing(ctx, w.Client, svc); err != nil {
			return err
		}
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: ServiceName}}
		if err := createIfMissing(ctx, w.Client, se); err != nil {
			return err
		}
		w.ensured = true
	}
	if err := w.stamp(ctx); err != nil {
		// Read everything again next time: someone may have deleted or changed it.
		w.ensured, w.slice = false, nil
		return err
	}
	if w.Recorder == nil {
		return nil
	}
	// The figures, for mcs-admin diagnose.
	cur2 := &mcsv1beta1.ServiceExport{}
	if err := w.Reader.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: ServiceName}, cur2); err != nil {
		return fmt.Errorf("read the canary ServiceExport: %w", err)
	}
	if sum := w.Recorder.Summary(); sum != "" && cur2.Annotations[SummaryAnnotation] != sum {
		if cur2.Annotations == nil {
			cur2.Annotations = map[string]string{}
		}
		cur2.Annotations[SummaryAnnotation] = sum
		// An update (the RBAC the exporter's finalizer needs); a conflict waits for the
		// next interval.
		if err := w.Client.Update(ctx, cur2); err != nil {
			return fmt.Errorf("annotate the canary ServiceExport: %w", err)
		}
	}
	return nil
}

// stamp writes the registry's time now into the canary endpoint: as late as possible, with
// the slice kept from the last write, so the measure starts when the change does.
func (w *Writer) stamp(ctx context.Context) error {
	if w.slice == nil {
		cur := &discoveryv1.EndpointSlice{}
		key := client.ObjectKey{Namespace: w.Namespace, Name: ServiceName + "-" + w.ClusterID}
		switch err := w.Reader.Get(ctx, key, cur); {
		case apierrors.IsNotFound(err):
			cur = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, AddressType: discoveryv1.AddressTypeIPv4}
		case err != nil:
			return fmt.Errorf("read the canary EndpointSlice: %w", err)
		}
		w.slice = cur
	}
	s := w.slice
	s.Labels = map[string]string{discoveryv1.LabelServiceName: ServiceName, discoveryv1.LabelManagedBy: ManagedBy}
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("canary"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](9)}}
	now, _ := w.Clock.RegistryNow()
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{address}, Hostname: ptr.To(stampPrefix + strconv.FormatInt(now.UnixMilli(), 10)),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	if s.ResourceVersion == "" {
		if err := w.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create the canary EndpointSlice: %w", err)
		}
		return nil
	}
	if err := w.Client.Update(ctx, s); err != nil {
		return fmt.Errorf("stamp the canary EndpointSlice: %w", err)
	}
	return nil
}

func createIfMissing(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the canary %T: %w", obj, err)
	}
	return nil
}

// Stamp reads the registry time from a canary endpoint's hostname.
func Stamp(hostname string) (time.Time, bool) {
	ms, err := strconv.ParseInt(strings.TrimPrefix(hostname, stampPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(hostname, stampPrefix) {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Recorder takes the canary import once it is written into this cluster and measures each
// source cluster's stamp against the registry's time now.
type Recorder struct {
	// Namespace holds the canary (the controller's namespace).
	Namespace string
	Clock     Clock
	// Observe receives each measure; nil: none.
	Observe func(source string, d time.Duration)

	mu      sync.Mutex
	last    map[string]time.Time
	samples map[string][]time.Duration
}

// Key is the canary import's name.
func (r *Recorder) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: ServiceName}
}

// Applied is called with the canary import after its EndpointSlices were written.
func (r *Recorder) Applied(imp *registryv1.ServiceImport) {
	now, ok := r.Clock.RegistryNow()
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.samples = map[string]time.Time{}, map[string][]time.Duration{}
	}
	for _, c := range imp.GetClusters() {
		var stamp time.Time
		for _, g := range c.GetEndpointGroups() {
			for _, e := range g.GetEndpoints() {
				if t, ok := Stamp(e.GetHostname()); ok && t.After(stamp) {
					stamp = t
				}
			}
		}
		src := c.GetClusterId()
		prev, seen := r.last[src]
		if stamp.IsZero() || !stamp.After(prev) || (!seen && len(r.last) >= maxSources) {
			continue
		}
		r.last[src] = stamp
		if !seen {
			continue // the first stamp seen may be old: measure changes only
		}
		d := max(now.Sub(stamp), 0)
		s := append(r.samples[src], d)
		if len(s) > kept {
			s = s[len(s)-kept:]
		}
		r.samples[src] = s
		if r.Observe != nil {
			r.Observe(src, d)
		}
	}
}

// Summary gives, per source cluster, the median and 99th percentile of the last samples.
func (r *Recorder) Summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	srcs := make([]string, 0, len(r.samples))
	for s := range r.samples {
		srcs = append(srcs, s)
	}
	sort.Strings(srcs)
	var parts []string
	for _, src := range srcs {
		s := append([]time.Duration(nil), r.samples[src]...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))] }
		parts = append(parts, fmt.Sprintf("%s p50=%.3fs p99=%.3fs n=%d", src, at(0.5).Seconds(), at(0.99).Seconds(), len(s)))
	}
	return strings.Join(parts, "; ")
}
