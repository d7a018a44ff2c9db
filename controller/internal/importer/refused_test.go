package importer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// refuseCluster makes the API server refuse every EndpointSlice write of one source
// cluster, as an admission policy or a rule the registry does not check would.
func refuseCluster(cluster string, refusal func(name string) error) interceptor.Funcs {
	check := func(obj client.Object) error {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[mcsv1beta1.LabelSourceCluster] == cluster {
			return refusal(s.Name)
		}
		return nil
	}
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := check(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := check(obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	}
}

// TestRefusedSourceCluster: the API server refusing one source cluster's slices costs that
// cluster only. The others' slices are written, the status is written (spec.ips of a first
// import included) and names the cluster, the object and the API server's message, the
// metric counts it, and Reconcile returns an error so the retry backs off; when the
// cluster's data is taken again, the condition clears.
func TestRefusedSourceCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal func(name string) error
	}{
		{"invalid", func(name string) error {
			return apierrors.NewInvalid(schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}, name,
				field.ErrorList{field.Invalid(field.NewPath("endpoints").Index(0).Child("addresses").Index(0), "127.0.0.1", "may not be in the loopback range")})
		}},
		{"forbidden by a policy", func(name string) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, name, errors.New("denied by policy no-bad-cluster"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key := types.NamespacedName{Namespace: "dynamo", Name: "router"}
			imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{key: routerImport("bad", "use1-a")}}
			r, c, _ := newImporter(t, imps, namespace("dynamo"))
			r.Client = interceptor.NewClient(c.(client.WithWatch), refuseCluster("bad", tc.refusal))
			var mu sync.Mutex
			refusedMetric := map[string]int{}
			r.Metrics.Refused = func(cluster string, n int) { mu.Lock(); refusedMetric[cluster] = n; mu.Unlock() }

			if _, err := r.Reconcile(ctx, req); !errors.Is(err, errRefused) {
				t.Fatalf("Reconcile = %v, want errRefused (the retry backs off)", err)
			}
			if got := slicesOf(t, c); len(got) != 1 || got["use1-a"] != "10.2.0.1" {
				t.Fatalf("slices = %v, want use1-a's alone", got)
			}
			var si mcsv1beta1.ServiceImport
			if err := c.Get(ctx, key, &si); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsRefused)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonAPIServerRefused ||
				!strings.Contains(cond.Message, "cluster bad: EndpointSlice dynamo/"+DerivedName("dynamo", "router")+"-bad-0-0") ||
				(tc.name == "invalid" && !strings.Contains(cond.Message, "may not be in the loopback range")) ||
				(tc.name != "invalid" && !strings.Contains(cond.Message, "denied by policy no-bad-cluster")) {
				t.Fatalf("EndpointsRefused = %+v", cond)
			}
			if ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready == nil ||
				ready.Status != metav1.ConditionTrue || !strings.Contains(ready.Message, "imported from 1 of 2 cluster(s)") {
				t.Fatalf("Ready = %+v", ready)
			}
			if refusedMetric["bad"] != 1 {
				t.Fatalf("metric = %v", refusedMetric)
			}

			// Every source refused: Ready says so.
			imps.imports[key] = routerImport("bad")
			_, _ = r.Reconcile(ctx, req)
			_ = c.Get(ctx, key, &si)
			if ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready == nil || ready.Status != metav1.ConditionFalse {
				t.Fatalf("Ready with every source refused = %+v", ready)
			}

			// The cluster's data is taken again (here: the cluster leaves): all clear.
			imps.imports[key] = routerImport("use1-a")
			if _, err := r.Reconcile(ctx, req); err != nil {
				t.Fatal(err)
			}
			_ = c.Get(ctx, key, &si)
			if cond := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsRefused); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNoneRefused {
				t.Fatalf("EndpointsRefused after = %+v", cond)
			}
			if refusedMetric["bad"] != 0 {
				t.Fatalf("metric after = %v", refusedMetric)
			}
		})
	}
}

// TestTransientFailureBlamesNoCluster: a write that fails for a transient reason is retried
// without naming a cluster.
func TestTransientFailureBlamesNoCluster(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "dynamo", Name: "router"}
	imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{key: routerImport("bad", "use1-a")}}
	r, c, _ := newImporter(t, imps, namespace("dynamo"))
	r.Client = interceptor.NewClient(c.(client.WithWatch), refuseCluster("bad", func(string) error {
		return apierrors.NewServiceUnavailable("etcd is slow")
	}))
	if _, err := r.Reconcile(ctx, req); err == nil || errors.Is(err, errRefused) {
		t.Fatalf("Reconcile = %v, want the transient error", err)
	}
	var si mcsv1beta1.ServiceImport
	_ = c.Get(ctx, key, &si)
	if cond := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsRefused); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("EndpointsRefused = %+v", cond)
	}
}
