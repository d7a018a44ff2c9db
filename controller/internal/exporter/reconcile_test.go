package exporter

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// fakeRegistry records the export writes and answers each with err (nil: accepted).
type fakeRegistry struct {
	registryv1.RegistryServiceClient
	mu      sync.Mutex
	puts    []*registryv1.PutExportRequest
	deletes []*registryv1.DeleteExportRequest
	err     error
}

func (f *fakeRegistry) Call(ctx context.Context, fn func(context.Context, registryv1.RegistryServiceClient) error) error {
	return fn(ctx, f)
}

func (f *fakeRegistry) PutExport(_ context.Context, in *registryv1.PutExportRequest, _ ...grpc.CallOption) (*registryv1.PutExportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, in)
	if f.err != nil {
		return nil, f.err
	}
	return &registryv1.PutExportResponse{}, nil
}

func (f *fakeRegistry) DeleteExport(_ context.Context, in *registryv1.DeleteExportRequest, _ ...grpc.CallOption) (*registryv1.DeleteExportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, in)
	return &registryv1.DeleteExportResponse{}, f.err
}

type fakeSession struct {
	state registryclient.State
	lost  int
}

func (s *fakeSession) State() registryclient.State { return s.state }
func (s *fakeSession) Lost()                       { s.lost++ }

type noImports struct{}

func (noImports) Get(types.NamespacedName) *registryv1.ServiceImport { return nil }

func (noImports) Synced() bool { return false }

var key = types.NamespacedName{Namespace: "dynamo", Name: "router"}

func exportObjects(withService bool) []client.Object {
	objs := []client.Object{&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	if withService {
		objs = append(objs,
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: key.Name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}})
	}
	return objs
}

func newReconciler(t *testing.T, reg *fakeRegistry, sess *fakeSession, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&mcsv1beta1.ServiceExport{}).Build()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Registry: reg, Session: sess, Imports: noImports{},
		Clusterset: "prod", ClusterID: "use1-a", BatchPeriod: 500 * time.Millisecond,
		sent: map[types.NamespacedName]*sent{}, announced: map[types.NamespacedName]map[string]string{}}
	return r, c
}

func conditions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var se mcsv1beta1.ServiceExport
	if err := c.Get(context.Background(), key, &se); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cond := range se.Status.Conditions {
		out[cond.Type] = string(cond.Status) + " " + cond.Reason
	}
	return out
}

var registered = registryclient.State{Registered: true, LeaseValid: true, Ever: true, Generation: 1}

// TestReconcile: a ServiceExport's conditions and registry writes, against the fake client.
func TestReconcile(t *testing.T) {
	cases := []struct {
		name        string
		service     bool
		state       registryclient.State
		registryErr error
		wantPuts    int
		wantReady   string
		wantValid   string
		wantRequeue time.Duration
	}{
		{"no Service: invalid, nothing sent", false, registered, nil, 0, "False Pending", "False NoService", 0},
		{"exported", true, registered, nil, 1, "True Ready", "True Valid", 0},
		{"not registered yet: waits", true, registryclient.State{}, nil, 0, "Unknown Pending", "True Valid", 0},
		{"lease expired", true, registryclient.State{Ever: true}, nil, 0, "False ClusterLeaseExpired", "True Valid", 0},
		{"over a registry limit: retried after LimitRetry", true, registered, status.Error(codes.ResourceExhausted, "cluster prod/use1-a: 1001 exports, at most 1000 per cluster"), 1, "False Failed", "True Valid", LimitRetry},
		{"rejected by the registry", true, registered, status.Error(codes.InvalidArgument, "spec.ports: 65 ports"), 1, "False Failed", "True Valid", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := &fakeRegistry{err: c.registryErr}
			r, cl := newReconciler(t, reg, &fakeSession{state: c.state}, exportObjects(c.service)...)
			res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if len(reg.puts) != c.wantPuts {
				t.Fatalf("%d PutExport, want %d", len(reg.puts), c.wantPuts)
			}
			got := conditions(t, cl)
			if got["Ready"] != c.wantReady || got["Valid"] != c.wantValid {
				t.Fatalf("conditions %v, want Ready=%s Valid=%s", got, c.wantReady, c.wantValid)
			}
			if c.wantRequeue > 0 && (res.RequeueAfter <= 0 || res.RequeueAfter > c.wantRequeue) {
				t.Fatalf("requeue after %v, want within %v", res.RequeueAfter, c.wantRequeue)
			}
			var se mcsv1beta1.ServiceExport
			_ = cl.Get(context.Background(), key, &se)
			if len(se.Finalizers) != 1 || se.Finalizers[0] != names.Finalizer {
				t.Fatalf("finalizers %v, want %s", se.Finalizers, names.Finalizer)
			}
			if c.wantPuts == 1 {
				p := reg.puts[0]
				if p.GetClusterId() != "use1-a" || p.GetService().GetName() != "router" || len(p.GetEndpointGroups()) != 1 || p.GetSpec().GetPorts()[0].GetPort() != 80 {
					t.Fatalf("PutExport %v", p)
				}
			}
		})
	}
}

// TestReconcileWritesNothingTwice: a second reconcile with nothing changed writes neither to
// the registry nor to the ServiceExport; a changed endpoint is sent once.
func TestReconcileWritesNothingTwice(t *testing.T) {
	ctx := context.Background()
	reg := &fakeRegistry{}
	now := time.Unix(1000, 0)
	r, cl := newReconciler(t, reg, &fakeSession{state: registered}, exportObjects(true)...)
	r.Now = func() time.Time { return now }
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var before mcsv1beta1.ServiceExport
	_ = cl.Get(ctx, key, &before)
	for range 3 {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	var after mcsv1beta1.ServiceExport
	_ = cl.Get(ctx, key, &after)
	if len(reg.puts) != 1 || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("no-op reconciles wrote: %d PutExport, ServiceExport resourceVersion %s → %s", len(reg.puts), before.ResourceVersion, after.ResourceVersion)
	}
	// An endpoint flips after the batch period: one write with it.
	now = now.Add(time.Second)
	var slice discoveryv1.EndpointSlice
	_ = cl.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "-abc"}, &slice)
	slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	if err := cl.Update(ctx, &slice); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if len(reg.puts) != 2 || reg.puts[1].GetEndpointGroups()[0].GetEndpoints()[0].GetConditions().GetReady() {
		t.Fatalf("the changed endpoint was not sent once: %d PutExport", len(reg.puts))
	}
}

// TestReconcileDeletion: a deleted ServiceExport is removed from the registry, then its
// finalizer; a registry that no longer knows the cluster makes the session register again
// and keeps the finalizer until the delete succeeds.
func TestReconcileDeletion(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name          string
		registryErr   error
		wantFinalizer bool
		wantLost      int
	}{
		{"deleted", nil, false, 0},
		{"cluster unknown to the registry", status.Error(codes.FailedPrecondition, "register the cluster first"), true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := &fakeRegistry{}
			sess := &fakeSession{state: registered}
			r, cl := newReconciler(t, reg, sess, exportObjects(true)...)
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			var se mcsv1beta1.ServiceExport
			_ = cl.Get(ctx, key, &se)
			if err := cl.Delete(ctx, &se); err != nil {
				t.Fatal(err)
			}
			reg.err = c.registryErr
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			if (err != nil) != c.wantFinalizer {
				t.Fatalf("Reconcile of the deletion: %v", err)
			}
			if len(reg.deletes) != 1 || reg.deletes[0].GetService().GetName() != "router" {
				t.Fatalf("DeleteExport calls %v", reg.deletes)
			}
			getErr := cl.Get(ctx, key, &se)
			if gone := getErr != nil; gone == c.wantFinalizer {
				t.Fatalf("ServiceExport gone=%v (%v), want the finalizer kept=%v", gone, getErr, c.wantFinalizer)
			}
			if sess.lost != c.wantLost {
				t.Fatalf("session told lost %d times, want %d", sess.lost, c.wantLost)
			}
		})
	}
}

// TestReconcileDeletedBeforeFirstReconcile: a ServiceExport that a sync sent and that was
// deleted before its first reconcile (so without the finalizer) is withdrawn from the
// registry all the same; one never sent costs no registry call.
func TestReconcileDeletedBeforeFirstReconcile(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		sent        bool
		registryErr error
		wantDeletes int
		wantErr     bool
	}{
		{"sent by a sync", true, nil, 1, false},
		{"never sent", false, nil, 0, false},
		{"registry unavailable: retried", true, status.Error(codes.Unavailable, "down"), 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := &fakeRegistry{err: c.registryErr}
			r, _ := newReconciler(t, reg, &fakeSession{state: registered})
			if c.sent {
				r.sent[key] = &sent{}
			}
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			if (err != nil) != c.wantErr {
				t.Fatalf("Reconcile: %v, want an error %v", err, c.wantErr)
			}
			if len(reg.deletes) != c.wantDeletes {
				t.Fatalf("DeleteExport calls %v, want %d", reg.deletes, c.wantDeletes)
			}
			if _, still := r.sent[key]; still != c.wantErr {
				t.Fatalf("still noted as sent: %v, want %v", still, c.wantErr)
			}
		})
	}
}

// TestReconcileConditionMessages: the messages say what to do.
func TestReconcileConditionMessages(t *testing.T) {
	reg := &fakeRegistry{err: status.Error(codes.ResourceExhausted, "1001 exports, at most 1000 per cluster (--max-exports-per-cluster)")}
	r, cl := newReconciler(t, reg, &fakeSession{state: registered}, exportObjects(true)...)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var se mcsv1beta1.ServiceExport
	_ = cl.Get(context.Background(), key, &se)
	ready := meta.FindStatusCondition(se.Status.Conditions, "Ready")
	if ready == nil || !strings.Contains(ready.Message, "--max-exports-per-cluster") || !strings.Contains(ready.Message, "retrying every 30s") {
		t.Fatalf("Ready = %+v", ready)
	}
}
