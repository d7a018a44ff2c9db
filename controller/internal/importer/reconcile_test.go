package importer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// fakeImports is the registry's watch as the importer reads it: refill, when set, is the
// RefillUntil of every cluster.
type fakeImports struct {
	synced  bool
	imports map[types.NamespacedName]*registryv1.ServiceImport
	refill  time.Time
}

func (f *fakeImports) RefillUntil(string) time.Time { return f.refill }

func (f *fakeImports) Get(k types.NamespacedName) *registryv1.ServiceImport { return f.imports[k] }

func (f *fakeImports) Keys() []types.NamespacedName {
	var out []types.NamespacedName
	for k := range f.imports {
		out = append(out, k)
	}
	return out
}

func (f *fakeImports) Synced() bool { return f.synced }

var req = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "dynamo", Name: "router"}}

func routerImport(clusters ...string) *registryv1.ServiceImport {
	imp := &registryv1.ServiceImport{
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "router"},
		Spec: &registryv1.ImportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, IpFamilies: []string{"IPv4"},
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
	}
	for i, c := range clusters {
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: c, EndpointGroups: []*registryv1.EndpointGroup{{
			AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.%d.0.1", i+1)}, Conditions: &registryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}}})
	}
	return imp
}

type writes struct {
	mu  sync.Mutex
	ops []string
}

func (w *writes) record(kind, op string) {
	w.mu.Lock()
	w.ops = append(w.ops, kind+" "+op)
	w.mu.Unlock()
}

func (w *writes) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.ops
	w.ops = nil
	sort.Strings(out)
	return out
}

func newImporter(t *testing.T, imps *fakeImports, objs ...client.Object) (*Reconciler, client.Client, *writes) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&mcsv1beta1.ServiceImport{}).Build()
	w := &writes{}
	r := New(Config{Client: c, Imports: imps, Metrics: Metrics{Write: w.record}})
	return r, c, w
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// imported lists the imported EndpointSlices of namespace dynamo.
func imported(t *testing.T, c client.Client) []discoveryv1.EndpointSlice {
	t.Helper()
	var list discoveryv1.EndpointSliceList
	if err := c.List(context.Background(), &list, client.InNamespace("dynamo"), client.MatchingLabels{discoveryv1.LabelManagedBy: names.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// slicesOf lists the EndpointSlices of the derived Service: cluster → addresses.
func slicesOf(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range imported(t, c) {
		var addrs []string
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		out[s.Labels[mcsv1beta1.LabelSourceCluster]] = strings.Join(addrs, ",")
	}
	return out
}

// TestImportReconcile: an import becomes a ServiceImport, its derived Service and one
// EndpointSlice per source cluster; a second reconcile writes nothing; a cluster that
// leaves takes its slice with it; a gone import removes everything.
func TestImportReconcile(t *testing.T) {
	ctx := context.Background()
	imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{{Namespace: "dynamo", Name: "router"}: routerImport("use1-a", "euw1-a")}}
	r, c, w := newImporter(t, imps, namespace("dynamo"))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got := w.take(); len(got) < 4 {
		t.Fatalf("first reconcile wrote %v", got)
	}
	var si mcsv1beta1.ServiceImport
	if err := c.Get(ctx, req.NamespacedName, &si); err != nil {
		t.Fatalf("ServiceImport: %v", err)
	}
	if si.Labels[names.ManagedByLabel] != names.ManagedBy || si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
		t.Fatalf("ServiceImport %+v", si)
	}
	if ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready == nil || ready.Status != metav1.ConditionTrue || len(si.Status.Clusters) != 2 {
		t.Fatalf("ServiceImport status %+v", si.Status)
	}
	var svc corev1.Service
	if err := c.Get(ctx, types.NamespacedName{Namespace: "dynamo", Name: DerivedName("dynamo", "router")}, &svc); err != nil {
		t.Fatalf("derived Service: %v", err)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Name != "router" || svc.OwnerReferences[0].Kind != "ServiceImport" {
		t.Fatalf("derived Service owners %+v", svc.OwnerReferences)
	}
	if got := slicesOf(t, c); got["use1-a"] != "10.1.0.1" || got["euw1-a"] != "10.2.0.1" || len(got) != 2 {
		t.Fatalf("slices %v", got)
	}

	// Nothing changed: nothing written.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("a no-op reconcile wrote %v", got)
	}

	// euw1-a stops exporting: its slice goes, and the status follows.
	imps.imports[types.NamespacedName{Namespace: "dynamo", Name: "router"}] = routerImport("use1-a")
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := slicesOf(t, c); len(got) != 1 || got["use1-a"] != "10.1.0.1" {
		t.Fatalf("slices after euw1-a left: %v", got)
	}
	if got := w.take(); !contains(got, "EndpointSlice delete") {
		t.Fatalf("writes after euw1-a left: %v", got)
	}

	// The import is gone from the registry (no deletion delay): everything goes.
	delete(imps.imports, types.NamespacedName{Namespace: "dynamo", Name: "router"})
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, &si); !apierrors.IsNotFound(err) {
		t.Fatalf("ServiceImport after the import left: %v", err)
	}
}

// TestImportReconcileRefill: a controller that started after a registry that started
// empty (RefillUntil ahead) keeps the slices of source clusters missing from the import,
// and the objects of an import missing altogether, says so in EndpointsHeld, and comes
// back when the time is up; then they go.
func TestImportReconcileRefill(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "dynamo", Name: "router"}
	imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{key: routerImport("use1-a", "euw1-a")}}
	r, c, w := newImporter(t, imps, namespace("dynamo"))
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	w.take()

	// The registry restarted empty with this controller: only use1-a has sent its exports.
	imps.imports[key] = routerImport("use1-a")
	imps.refill = time.Now().Add(time.Minute)
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Fatalf("Reconcile during the refill: %+v %v", res, err)
	}
	if got := slicesOf(t, c); len(got) != 2 || got["euw1-a"] != "10.2.0.1" {
		t.Fatalf("slices during the refill: %v", got)
	}
	if got := w.take(); contains(got, "EndpointSlice delete") {
		t.Fatalf("writes during the refill: %v", got)
	}
	var si mcsv1beta1.ServiceImport
	if err := c.Get(ctx, key, &si); err != nil {
		t.Fatal(err)
	}
	if held := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsHeld); held == nil || held.Status != metav1.ConditionTrue || !strings.Contains(held.Message, "euw1-a") {
		t.Fatalf("EndpointsHeld during the refill: %+v", held)
	}

	// The whole import missing: nothing removed either.
	delete(imps.imports, key)
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("Reconcile of a missing import during the refill: %+v %v", res, err)
	}
	if err := c.Get(ctx, key, &si); err != nil {
		t.Fatalf("ServiceImport removed during the refill: %v", err)
	}

	// The time is up: euw1-a did not come back, its slice goes.
	imps.imports[key] = routerImport("use1-a")
	imps.refill = time.Now().Add(-time.Second)
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile after the refill: %+v %v", res, err)
	}
	if got := slicesOf(t, c); len(got) != 1 || got["use1-a"] == "" {
		t.Fatalf("slices after the refill: %v", got)
	}
	if err := c.Get(ctx, key, &si); err != nil {
		t.Fatal(err)
	}
	if held := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsHeld); held == nil || held.Status != metav1.ConditionFalse {
		t.Fatalf("EndpointsHeld after the refill: %+v", held)
	}
}

// TestImportReconcileHolds: what the importer does not write.
func TestImportReconcileHolds(t *testing.T) {
	ctx := context.Background()
	one := map[types.NamespacedName]*registryv1.ServiceImport{{Namespace: "dynamo", Name: "router"}: routerImport("use1-a")}
	t.Run("before the watch's first snapshot: requeued, nothing removed", func(t *testing.T) {
		r, _, w := newImporter(t, &fakeImports{synced: false})
		res, err := r.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter == 0 || len(w.take()) != 0 {
			t.Fatalf("Reconcile = %+v, %v", res, err)
		}
	})
	t.Run("namespace missing: held", func(t *testing.T) {
		r, c, w := newImporter(t, &fakeImports{synced: true, imports: one})
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, req.NamespacedName, &si); !apierrors.IsNotFound(err) || len(w.take()) != 0 || !r.held["namespace_missing"][req.NamespacedName] {
			t.Fatalf("an import into a missing namespace was written (%v) or not held", err)
		}
	})
	t.Run("namespace missing, --create-namespaces: created", func(t *testing.T) {
		r, c, w := newImporter(t, &fakeImports{synced: true, imports: one})
		r.CreateNamespaces = true
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, types.NamespacedName{Name: "dynamo"}, &corev1.Namespace{}); err != nil || !contains(w.take(), "Namespace create") {
			t.Fatalf("namespace not created: %v", err)
		}
	})
	t.Run("a ServiceImport another controller made: not adopted", func(t *testing.T) {
		theirs := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "router"}, Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP}}
		r, c, w := newImporter(t, &fakeImports{synced: true, imports: one}, namespace("dynamo"), theirs)
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		var si mcsv1beta1.ServiceImport
		_ = c.Get(ctx, req.NamespacedName, &si)
		if si.Labels[names.ManagedByLabel] == names.ManagedBy || len(slicesOf(t, c)) != 0 || len(w.take()) != 0 {
			t.Fatalf("an unmanaged ServiceImport was taken over: %+v", si.ObjectMeta)
		}
	})
	t.Run("a cluster gone from the import with --import-deletion-delay: kept, DeletionDelayed", func(t *testing.T) {
		imps := &fakeImports{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{req.NamespacedName: routerImport("use1-a", "euw1-a")}}
		r, c, _ := newImporter(t, imps, namespace("dynamo"))
		r.DeletionDelay = time.Minute
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		imps.imports[req.NamespacedName] = routerImport("use1-a")
		res, err := r.Reconcile(ctx, req)
		if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
			t.Fatalf("Reconcile = %+v, %v; want a requeue at the delay's end", res, err)
		}
		var si mcsv1beta1.ServiceImport
		_ = c.Get(ctx, req.NamespacedName, &si)
		if h := meta.FindStatusCondition(si.Status.Conditions, ConditionEndpointsHeld); h == nil || h.Status != metav1.ConditionTrue || h.Reason != ReasonDeletionDelayed || !strings.Contains(h.Message, "euw1-a") {
			t.Fatalf("EndpointsHeld = %+v", h)
		}
		if got := slicesOf(t, c); len(got) != 2 || len(si.Status.Clusters) != 2 {
			t.Fatalf("slices %v, status clusters %v: want euw1-a's kept and listed", got, si.Status.Clusters)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
