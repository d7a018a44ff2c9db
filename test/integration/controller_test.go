package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

const finalizer = "multicluster.dynamo.nvidia.com/service-export"

// conditions renders a ServiceExport's conditions as the spec's jsonpath does:
// "Valid=True Valid\nReady=True Ready\nConflict=False NoConflicts".
func conditions(se *mcsv1beta1.ServiceExport) string {
	var lines []string
	for _, t := range []string{"Valid", "Ready", "Conflict"} {
		for _, c := range se.Status.Conditions {
			if c.Type == t {
				lines = append(lines, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// waitExport waits until the ServiceExport's conditions are want.
func waitExport(t *testing.T, c *harness.Cluster, ns, name, want string, timeout time.Duration) *mcsv1beta1.ServiceExport {
	t.Helper()
	se := &mcsv1beta1.ServiceExport{}
	harness.Eventually(t, fmt.Sprintf("%s: ServiceExport %s/%s conditions", c.Name, ns, name), timeout, func() string {
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, se); err != nil {
			return err.Error()
		}
		if got := conditions(se); got != want {
			return got + "\nwant:\n" + want
		}
		return ""
	})
	return se
}

const readyConditions = "Valid=True Valid\nReady=True Ready\nConflict=False NoConflicts"

func service(ns, name string, ports ...int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
	for i, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: p})
	}
	if len(ports) == 1 {
		s.Spec.Ports[0].Name = "http"
	}
	return s
}

func serviceExport(ns, name string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// slice is an EndpointSlice of a Service, as kube-controller-manager writes it.
func slice(ns, svc, name string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", svc, i)},
		})
	}
	return s
}

func mustCreate(t *testing.T, c *harness.Cluster, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("%s: create %T %s: %v", c.Name, o, o.GetName(), err)
		}
	}
}

// registryExports returns "cluster:namespace/name:endpoints" for every export the registry holds.
func registryExports(t *testing.T, reg *harness.Registry) []string {
	t.Helper()
	code, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/exports?includeEndpoints=true")
	if code == http.StatusBadRequest && strings.Contains(body, "ERROR_REASON_CLUSTERSET_UNKNOWN") {
		return nil
	}
	var resp struct {
		Exports []struct {
			ClusterID string `json:"clusterId"`
			Service   struct{ Namespace, Name string }
			Groups    []struct {
				Endpoints []struct{ Addresses []string }
			} `json:"endpointGroups"`
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &resp) != nil {
		t.Fatalf("list exports: %d %s", code, body)
	}
	var out []string
	for _, e := range resp.Exports {
		var ips []string
		for _, g := range e.Groups {
			for _, ep := range g.Endpoints {
				ips = append(ips, ep.Addresses...)
			}
		}
		sort.Strings(ips)
		out = append(out, fmt.Sprintf("%s:%s/%s:%s", e.ClusterID, e.Service.Namespace, e.Service.Name, strings.Join(ips, ",")))
	}
	return out
}

func waitRegistryExports(t *testing.T, reg *harness.Registry, want string) {
	t.Helper()
	harness.Eventually(t, "registry exports", 30*time.Second, func() string {
		if got := fmt.Sprint(registryExports(t, reg)); got != want {
			return got + ", want " + want
		}
		return ""
	})
}

func controllerArgs(reg *harness.Registry, cluster string, extra ...string) []string {
	return append([]string{
		"--registry-url=http://" + reg.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=" + cluster, "--region=us-east-1",
		"--endpoint-batch-period=100ms",
	}, extra...)
}

// TestControllerExportPath covers the export path against a real kube-apiserver and the
// real registry: NoService, InvalidServiceType, Valid/Ready/NoConflicts, endpoints sent,
// the finalizer, Failed with the ExportFailed Event, v1alpha1-written exports, and export by
// label.
func TestControllerExportPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a")...)

	// A ServiceExport without its Service.
	mustCreate(t, cl, serviceExport("dynamo", "my-dgd-pool-relay"))
	waitExport(t, cl, "dynamo", "my-dgd-pool-relay", "Valid=False NoService\nReady=False Pending\nConflict=False NoConflicts", 30*time.Second)
	waitEvent(t, cl, "dynamo", "my-dgd-pool-relay", "NoService", "Valid=False NoService")

	// The Service and its endpoints arrive: exported, endpoints in the registry.
	mustCreate(t, cl, service("dynamo", "my-dgd-pool-relay", 80), slice("dynamo", "my-dgd-pool-relay", "my-dgd-pool-relay-abcde", "10.1.0.1", "10.1.0.2"))
	se := waitExport(t, cl, "dynamo", "my-dgd-pool-relay", readyConditions, 30*time.Second)
	if !strings.Contains(strings.Join(se.Finalizers, ","), finalizer) {
		t.Fatalf("finalizer missing: %v", se.Finalizers)
	}
	waitRegistryExports(t, reg, "[use1-a:dynamo/my-dgd-pool-relay:10.1.0.1,10.1.0.2]")

	// An endpoint added to the slice reaches the registry.
	var s discoveryv1.EndpointSlice
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "my-dgd-pool-relay-abcde"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.3"}})
	if err := cl.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	waitRegistryExports(t, reg, "[use1-a:dynamo/my-dgd-pool-relay:10.1.0.1,10.1.0.2,10.1.0.3]")

	// ExternalName: InvalidServiceType.
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "external"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	mustCreate(t, cl, ext, serviceExport("dynamo", "external"))
	waitExport(t, cl, "dynamo", "external", "Valid=False InvalidServiceType\nReady=False Pending\nConflict=False NoConflicts", 30*time.Second)
	waitEvent(t, cl, "dynamo", "external", "InvalidServiceType", "Valid=False InvalidServiceType")

	// 65 ports: the registry rejects it; Ready=False Failed and an ExportFailed Event.
	ports := make([]int32, 65)
	for i := range ports {
		ports[i] = int32(1000 + i)
	}
	mustCreate(t, cl, service("dynamo", "too-many-ports", ports...), serviceExport("dynamo", "too-many-ports"))
	waitExport(t, cl, "dynamo", "too-many-ports", "Valid=True Valid\nReady=False Failed\nConflict=False NoConflicts", 30*time.Second)
	waitEvent(t, cl, "dynamo", "too-many-ports", "ExportFailed", "spec.ports: 65 ports, at most 64 allowed")

	// A ServiceExport written as v1alpha1, as the Dynamo operator writes it (empty spec,
	// controlled by a DynamoGraphDeployment), is exported like any other and never taken
	// over.
	mustCreate(t, cl, service("dynamo", "alpha", 80))
	alpha := &unstructured.Unstructured{}
	alpha.SetAPIVersion("multicluster.x-k8s.io/v1alpha1")
	alpha.SetKind("ServiceExport")
	alpha.SetNamespace("dynamo")
	alpha.SetName("alpha")
	yes := true
	dgd := metav1.OwnerReference{APIVersion: "nvidia.com/v1alpha1", Kind: "DynamoGraphDeployment", Name: "my-dgd",
		UID: "0b4f7c3e-5d0a-4b7e-9a51-3f1f2f8c9d10", Controller: &yes, BlockOwnerDeletion: &yes}
	alpha.SetOwnerReferences([]metav1.OwnerReference{dgd})
	if err := cl.Client.Create(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	se = waitExport(t, cl, "dynamo", "alpha", readyConditions, 30*time.Second)
	if len(se.OwnerReferences) != 1 || se.OwnerReferences[0].UID != dgd.UID {
		t.Fatalf("the operator's ServiceExport lost its owner: %+v", se.OwnerReferences)
	}

	// Export by label: a ServiceExport owned by the Service; removing the label deletes it
	// and its export.
	labelled := service("dynamo", "by-label", 80)
	labelled.Labels = map[string]string{"dynamo.nvidia.com/mcs-export": "true"}
	mustCreate(t, cl, labelled)
	se = waitExport(t, cl, "dynamo", "by-label", readyConditions, 30*time.Second)
	if len(se.OwnerReferences) != 1 || se.OwnerReferences[0].Kind != "Service" || se.OwnerReferences[0].Controller == nil || !*se.OwnerReferences[0].Controller {
		t.Fatalf("label-created ServiceExport owner = %+v", se.OwnerReferences)
	}
	waitRegistryExports(t, reg, "[use1-a:dynamo/alpha: use1-a:dynamo/by-label: use1-a:dynamo/my-dgd-pool-relay:10.1.0.1,10.1.0.2,10.1.0.3]")
	if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(labelled), labelled); err != nil {
		t.Fatal(err)
	}
	delete(labelled.Labels, "dynamo.nvidia.com/mcs-export")
	if err := cl.Client.Update(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cl, serviceExport("dynamo", "by-label"))
	waitRegistryExports(t, reg, "[use1-a:dynamo/alpha: use1-a:dynamo/my-dgd-pool-relay:10.1.0.1,10.1.0.2,10.1.0.3]")

	// A ServiceExport the user wrote is never taken over or deleted by the label.
	user := service("dynamo", "user-owned", 80)
	mustCreate(t, cl, serviceExport("dynamo", "user-owned"), user)
	waitExport(t, cl, "dynamo", "user-owned", readyConditions, 30*time.Second)
	user.Labels = map[string]string{"dynamo.nvidia.com/mcs-export": "true"}
	if err := cl.Client.Update(ctx, user); err != nil {
		t.Fatal(err)
	}
	delete(user.Labels, "dynamo.nvidia.com/mcs-export")
	if err := cl.Client.Update(ctx, user); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	se = waitExport(t, cl, "dynamo", "user-owned", readyConditions, 5*time.Second)
	if len(se.OwnerReferences) != 0 {
		t.Fatalf("user-written ServiceExport was taken over: %+v", se.OwnerReferences)
	}

	// Deleting a ServiceExport removes the export from the registry, then the finalizer.
	if err := cl.Client.Delete(ctx, serviceExport("dynamo", "alpha")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cl, serviceExport("dynamo", "alpha"))
	waitRegistryExports(t, reg, "[use1-a:dynamo/my-dgd-pool-relay:10.1.0.1,10.1.0.2,10.1.0.3 use1-a:dynamo/user-owned:]")
}

func waitGone(t *testing.T, c *harness.Cluster, o client.Object) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("%s: %T %s gone", c.Name, o, o.GetName()), 30*time.Second, func() string {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v), finalizers %v", err, o.GetFinalizers())
		}
		return ""
	})
}

// waitEvent waits for an Event about the ServiceExport with the reason and a note containing text.
func waitEvent(t *testing.T, c *harness.Cluster, ns, name, reason, text string) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("%s Event for ServiceExport %s/%s containing %q", reason, ns, name, text), 30*time.Second, func() string {
		var events corev1.EventList
		if err := c.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "ServiceExport" && e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) {
				return ""
			}
		}
		return fmt.Sprintf("%d events, none matching", len(events.Items))
	})
}

// TestControllerConflict: two clusters export the same Service with different ports; both
// ServiceExports report Conflict=True PortConflict, the oldest export wins, and when the
// newer one is aligned the conflict clears on both — without any write from the first.
func TestControllerConflict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a", "usw2-a"}})
	for _, cl := range cls {
		createNamespaces(t, ctx, cl.Client, "dynamo")
		cl.StartController(t, "mcs-controller/"+cl.Name, controllerArgs(reg, cl.Name)...)
	}
	a, b := cls[0], cls[1]
	mustCreate(t, a, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	waitExport(t, a, "dynamo", "svc", readyConditions, 30*time.Second)
	bsvc := service("dynamo", "svc", 81)
	mustCreate(t, b, bsvc, serviceExport("dynamo", "svc"))
	conflict := "Valid=True Valid\nReady=True Ready\nConflict=True PortConflict"
	waitExport(t, b, "dynamo", "svc", conflict, 30*time.Second)
	se := waitExport(t, a, "dynamo", "svc", conflict, 30*time.Second)
	for _, c := range cls {
		waitEvent(t, c, "dynamo", "svc", "PortConflict", "Conflict=True PortConflict")
	}
	if c := findCondition(se, "Conflict"); !strings.Contains(c.Message, "from cluster use1-a, wins") {
		t.Fatalf("conflict message = %q", c.Message)
	}
	// The import's spec is the oldest export's; usw2-a's port 81 is named as left out.
	var imports struct {
		Imports []struct {
			Spec struct {
				Ports []struct{ Port int32 }
			}
			WinningClusterID string `json:"winningClusterId"`
		}
	}
	_, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports")
	if err := json.Unmarshal([]byte(body), &imports); err != nil || len(imports.Imports) != 1 || imports.Imports[0].WinningClusterID != "use1-a" ||
		fmt.Sprint(imports.Imports[0].Spec.Ports) != "[{80}]" || !strings.Contains(body, `"excludedPorts":[{"name":"http","protocol":"TCP","appProtocol":"","port":81}]`) {
		t.Fatalf("the oldest export does not win: %s", body)
	}
	if err := b.Client.Get(ctx, client.ObjectKeyFromObject(bsvc), bsvc); err != nil {
		t.Fatal(err)
	}
	bsvc.Spec.Ports[0].Port = 80
	if err := b.Client.Update(ctx, bsvc); err != nil {
		t.Fatal(err)
	}
	waitExport(t, b, "dynamo", "svc", readyConditions, 30*time.Second)
	waitExport(t, a, "dynamo", "svc", readyConditions, 30*time.Second)

	// mcs-api v1beta1: PortConflict "if the ports are not identical in all the constituent
	// Services". a: tcp/42, udp/42; b: tcp/42, sctp/142. The import holds the union; both
	// exports report the conflict and name the ports that differ.
	ports := func(svc *corev1.Service, ps ...corev1.ServicePort) *corev1.Service {
		svc.Spec.Ports = ps
		return svc
	}
	tcp := corev1.ServicePort{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}
	mustCreate(t, a, ports(service("dynamo", "sets"), tcp, corev1.ServicePort{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42}), serviceExport("dynamo", "sets"))
	waitExport(t, a, "dynamo", "sets", readyConditions, 30*time.Second)
	mustCreate(t, b, ports(service("dynamo", "sets"), tcp, corev1.ServicePort{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 142}), serviceExport("dynamo", "sets"))
	want := "ports differ: use1-a lacks sctp/SCTP/142; usw2-a lacks udp/UDP/42"
	for _, c := range cls {
		se := waitExport(t, c, "dynamo", "sets", conflict, 30*time.Second)
		harness.Eventually(t, c.Name+": the conflict names the ports", 30*time.Second, func() string {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(se), se); err != nil {
				return err.Error()
			}
			if m := findCondition(se, "Conflict").Message; !strings.Contains(m, want) {
				return m
			}
			return ""
		})
	}
	waitImport(t, b, "dynamo", "sets", "ClusterSetIP [tcp/TCP/42 udp/UDP/42 sctp/SCTP/142] clusters=[use1-a usw2-a] ips svc:true []")

	// Locality: policies that disagree are a LocalityConflict on both exports, the oldest
	// export's policy is imported; a policy that is not one is InvalidLocality, and nothing
	// of it is exported.
	withLocality := func(se *mcsv1beta1.ServiceExport, policy string) *mcsv1beta1.ServiceExport {
		se.Annotations = map[string]string{"multicluster.dynamo.nvidia.com/locality": policy}
		return se
	}
	mustCreate(t, a, service("dynamo", "near", 80), withLocality(serviceExport("dynamo", "near"), "cluster"))
	waitExport(t, a, "dynamo", "near", readyConditions, 30*time.Second)
	mustCreate(t, b, service("dynamo", "near", 80), withLocality(serviceExport("dynamo", "near"), "cluster,region"))
	for _, c := range cls {
		waitExport(t, c, "dynamo", "near", "Valid=True Valid\nReady=True Ready\nConflict=True LocalityConflict", 30*time.Second)
	}
	harness.Eventually(t, "the oldest export's locality imported", 30*time.Second, func() string {
		si := &mcsv1beta1.ServiceImport{}
		if err := b.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "near"}, si); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(si.Status.Conditions, "Locality"); c == nil || !strings.HasPrefix(c.Message, "policy cluster;") {
			return fmt.Sprintf("Locality condition %+v", c)
		}
		return ""
	})
	mustCreate(t, a, service("dynamo", "nowhere", 80), withLocality(serviceExport("dynamo", "nowhere"), "zone"))
	se = waitExport(t, a, "dynamo", "nowhere", "Valid=False InvalidLocality\nReady=False Pending\nConflict=False NoConflicts", 30*time.Second)
	if m := findCondition(se, "Valid").Message; !strings.Contains(m, `"zone" is not a tier`) {
		t.Errorf("InvalidLocality message %q does not name the bad tier", m)
	}
	if exports := registryExports(t, reg); slices.ContainsFunc(exports, func(e string) bool { return strings.Contains(e, "nowhere") }) {
		t.Errorf("the registry holds an export of an invalid policy: %v", exports)
	}

	// Events mark transitions, not reconciles: svc entered the conflict once and left it
	// once in each cluster, though each controller reconciled it many times meanwhile.
	for i, c := range cls {
		if got := countEvents(t, c, "dynamo", "svc", "PortConflict"); got != 1 {
			t.Errorf("%s: %d PortConflict Events for svc, want 1:\n%s", c.Name, got, eventLines(ctx, c, "svc"))
		}
		// use1-a exported first (no conflict), then saw it, then its end; usw2-a entered
		// in conflict, then left it.
		if got, want := countEvents(t, c, "dynamo", "svc", "NoConflicts"), 2-i; got != want {
			t.Errorf("%s: %d NoConflicts Events for svc, want %d:\n%s", c.Name, got, want, eventLines(ctx, c, "svc"))
		}
	}
}

// eventLines lists a ServiceExport's Events in time order, for failure messages.
func eventLines(ctx context.Context, c *harness.Cluster, name string) string {
	var events corev1.EventList
	if err := c.Client.List(ctx, &events, client.InNamespace("dynamo")); err != nil {
		return err.Error()
	}
	var lines []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "ServiceExport" && e.InvolvedObject.Name == name {
			lines = append(lines, fmt.Sprintf("%s %s %s", e.EventTime.Format("15:04:05.000000"), e.Reason, e.Message))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// countEvents counts the Events of one reason for a ServiceExport, a series counting as
// its length.
func countEvents(t *testing.T, c *harness.Cluster, ns, name, reason string) int {
	t.Helper()
	var events corev1.EventList
	if err := c.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "ServiceExport" && e.InvolvedObject.Name == name && e.Reason == reason {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

func findCondition(se *mcsv1beta1.ServiceExport, t string) metav1.Condition {
	for _, c := range se.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// TestControllerPendingLeaseExpiryAndRestart: Pending until the registry answers; Ready
// after; ClusterLeaseExpired when heartbeats stop reaching the registry; and after a
// memory-registry restart the controller registers again and sends every export at once.
func TestControllerPendingLeaseExpiryAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := memberCluster(t, ctx)
	grpcPort := harness.FreePort(t)
	grpcAddr := harness.Addr(grpcPort)
	cl.StartController(t, "mcs-controller",
		"--registry-url=http://"+grpcAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1",
		"--lease-duration=6s", "--renew-interval=2s", "--registry-call-timeout=1s")
	mustCreate(t, cl, service("dynamo", "one", 80), serviceExport("dynamo", "one"), service("dynamo", "two", 81), serviceExport("dynamo", "two"))
	waitExport(t, cl, "dynamo", "one", "Valid=True Valid\nReady=Unknown Pending\nConflict=Unknown Pending", 30*time.Second)

	reg := harness.StartRegistryAt(t, grpcAddr, "--store=memory")
	waitExport(t, cl, "dynamo", "one", readyConditions, 30*time.Second)
	waitExport(t, cl, "dynamo", "two", readyConditions, 30*time.Second)

	reg.Stop(10 * time.Second)
	waitExport(t, cl, "dynamo", "one", "Valid=True Valid\nReady=False ClusterLeaseExpired\nConflict=Unknown Pending", 30*time.Second)
	waitEvent(t, cl, "dynamo", "one", "ClusterLeaseExpired", "Ready=False ClusterLeaseExpired")

	start := time.Now()
	reg.Restart(t) // an empty memory store on the same ports
	waitExport(t, cl, "dynamo", "one", readyConditions, 30*time.Second)
	waitRegistryExports(t, reg, "[use1-a:dynamo/one: use1-a:dynamo/two:]")
	t.Logf("registry restart: exports whole again after %s", time.Since(start).Round(10*time.Millisecond))
	if !strings.Contains(reg.Output(), `msg="exports synced" version=`) || !strings.Contains(reg.Output(), "exports=2") {
		t.Fatalf("the controller did not send its exports in one SyncExports:\n%s", reg.Output())
	}
}

// TestControllerLeaderElection: two replicas for one cluster; only the leader registers and
// writes; when it stops, the other takes over.
func TestControllerLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	args := controllerArgs(reg, "use1-a", "--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms")
	first := cl.StartController(t, "mcs-controller-0", args...)
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	waitExport(t, cl, "dynamo", "svc", readyConditions, 30*time.Second)
	second := cl.StartController(t, "mcs-controller-1", args...)
	time.Sleep(3 * time.Second)
	if strings.Contains(second.Output(), `"msg":"cluster registered"`) {
		t.Fatalf("the second replica registered while the first leads:\n%s", second.Output())
	}
	if !strings.Contains(first.Output(), `"msg":"cluster registered"`) {
		t.Fatalf("the leader did not register:\n%s", first.Output())
	}
	start := time.Now()
	first.Stop(10 * time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(second.Output(), `"msg":"cluster registered"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the second replica did not take over:\n%s", second.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("leader takeover: the second replica registered %s after the first stopped", time.Since(start).Round(10*time.Millisecond))
	// The new leader keeps exporting: a new ServiceExport becomes Ready.
	mustCreate(t, cl, service("dynamo", "after", 80), serviceExport("dynamo", "after"))
	waitExport(t, cl, "dynamo", "after", readyConditions, 30*time.Second)
	waitRegistryExports(t, reg, "[use1-a:dynamo/after: use1-a:dynamo/svc:]")
}

// TestControllerFailover: the first registry URL is down, so the controller uses the
// second; when the first comes up, the controller fails back to it and sends its exports.
func TestControllerFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	firstAddr := harness.Addr(harness.FreePort(t))
	second := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	ctl := cl.StartController(t, "mcs-controller",
		"--registry-url=http://"+firstAddr, "--registry-url=http://"+second.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1", "--registry-call-timeout=1s",
		"--registry-failback-min-interval=1s", "--registry-failback-max-interval=2s")
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	waitExport(t, cl, "dynamo", "svc", readyConditions, 30*time.Second)
	waitRegistryExports(t, second, "[use1-a:dynamo/svc:]")

	first := harness.StartRegistryAt(t, firstAddr, "--store=memory")
	waitRegistryExports(t, first, "[use1-a:dynamo/svc:]")
	if _, body := get(t, "http://"+ctl.MetricsAddr+"/metrics"); !strings.Contains(body, `mcs_controller_registry_active{url="http://`+firstAddr+`"} 1`) || !strings.Contains(body, "mcs_controller_registry_failovers_total 2") {
		t.Fatalf("metrics after failback:\n%s", grepLines(body, "mcs_controller_registry"))
	}
}

// TestControllerRefusesBadFlags: an http:// URL without the opt-in, mixed schemes, and a
// missing cluster id are clear start-up errors.
func TestControllerRefusesBadFlags(t *testing.T) {
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	bin := harness.Binary(t, "mcs-controller")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--registry-url=http://registry:9090", "--clusterset-id=prod", "--cluster-id=a"}, "http:// sends the cluster's exports in plaintext; use https:// or set --registry-allow-insecure-http"},
		{[]string{"--registry-url=https://a:9090", "--registry-url=http://b:9090", "--registry-allow-insecure-http", "--clusterset-id=prod", "--cluster-id=a"}, "every URL must use the same scheme"},
		{[]string{"--registry-url=https://a:9090", "--clusterset-id=prod"}, "--cluster-id is not set and ClusterProperty cluster.clusterset.k8s.io does not exist"},
		{[]string{"--registry-url=https://a:9090", "--clusterset-id=Prod_1", "--cluster-id=a"}, `--clusterset-id "Prod_1": must be a DNS label`},
		{[]string{"--registry-url=https://a:9090", "--clusterset-id=prod", "--cluster-id=a", "--import-workers=0"}, "--import-workers 0: must be between 1 and 64"},
		{[]string{"--registry-url=https://a:9090", "--clusterset-id=prod", "--cluster-id=a", "--default-locality=cluster,zone"}, `invalid argument "cluster,zone" for "--default-locality" flag: "zone" is not a tier`},
	}
	for _, tc := range tests {
		out, err := exec.Command(bin, append(tc.args, "--kubeconfig="+cl.Kubeconfig, "--leader-elect=false", "--metrics-addr=0", "--health-probe-addr=0")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("mcs-controller %v: %v\n%s\nwant an error containing %q", tc.args, err, out, tc.want)
		}
	}
}

// TestControllerIdentityFromClusterProperty: without the id flags the controller reads the
// KEP-2149 ClusterProperties, and the region from the most common node label.
func TestControllerIdentityFromClusterProperty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	for name, value := range map[string]string{"clusterset.k8s.io": "prod", "cluster.clusterset.k8s.io": "from-property"} {
		cp := &unstructured.Unstructured{}
		cp.SetAPIVersion("about.k8s.io/v1alpha1")
		cp.SetKind("ClusterProperty")
		cp.SetName(name)
		_ = unstructured.SetNestedField(cp.Object, value, "spec", "value")
		if err := cl.Client.Create(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	for i, region := range []string{"us-west-2", "us-east-1", "us-west-2"} {
		if _, err := cl.CreateNode(ctx, fmt.Sprintf("node-%d", i), map[string]string{"topology.kubernetes.io/region": region}); err != nil {
			t.Fatal(err)
		}
	}
	cl.StartController(t, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters")
		if strings.Contains(body, `"clusterId":"from-property","region":"us-west-2","lease":{"state":"LEASE_STATE_ACTIVE"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not registered from its ClusterProperties: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// registryWrites counts the export writes the registry answered (PutExport, SyncExports,
// DeleteExport), whatever their status.
func registryWrites(tb testing.TB, reg *harness.Registry) int {
	tb.Helper()
	body := harness.Scrape(tb, "http://"+reg.AdminAddr+"/metrics")
	return int(harness.MetricSum(body, "grpc_server_handled_total", func(labels string) bool {
		return strings.Contains(labels, `grpc_method="PutExport"`) || strings.Contains(labels, `grpc_method="SyncExports"`) || strings.Contains(labels, `grpc_method="DeleteExport"`)
	}))
}

// TestControllerRestartWritesNothing: a controller restart with nothing changed makes no
// export write to the registry and no status update.
func TestControllerRestartWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	ctl := cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a")...)
	for _, name := range []string{"one", "two", "three"} {
		mustCreate(t, cl, service("dynamo", name, 80), serviceExport("dynamo", name), slice("dynamo", name, name+"-x", "10.1.0.1"))
	}
	// Invalid exports, which are reconciled too, must not cost a registry write either.
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "external"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	mustCreate(t, cl, ext, serviceExport("dynamo", "external"), serviceExport("dynamo", "no-service"))
	waitExport(t, cl, "dynamo", "external", "Valid=False InvalidServiceType\nReady=False Pending\nConflict=False NoConflicts", 30*time.Second)
	waitExport(t, cl, "dynamo", "no-service", "Valid=False NoService\nReady=False Pending\nConflict=False NoConflicts", 30*time.Second)
	versions := map[string]string{}
	for _, name := range []string{"one", "two", "three"} {
		versions[name] = waitExport(t, cl, "dynamo", name, readyConditions, 30*time.Second).ResourceVersion
	}
	time.Sleep(2 * time.Second) // let the last writes settle
	for _, name := range []string{"one", "two", "three"} {
		versions[name] = waitExport(t, cl, "dynamo", name, readyConditions, time.Second).ResourceVersion
	}
	before := registryWrites(t, reg)
	ctl.Stop(10 * time.Second)
	ctl2 := cl.StartController(t, "mcs-controller-restarted", controllerArgs(reg, "use1-a")...)
	waitOutput(t, ctl2.Process, "the registry holds the cluster's exports already; nothing sent")
	time.Sleep(3 * time.Second)
	if after := registryWrites(t, reg); after != before {
		t.Fatalf("a restart with nothing changed wrote %d exports to the registry", after-before)
	}
	for _, name := range []string{"one", "two", "three"} {
		if rv := waitExport(t, cl, "dynamo", name, readyConditions, time.Second).ResourceVersion; rv != versions[name] {
			t.Fatalf("ServiceExport %s was updated by a restart with nothing changed (%s -> %s)", name, versions[name], rv)
		}
	}
}

// TestControllerRestoresMissingExports: when the registry loses one of the cluster's exports
// while the cluster stays registered (a replicated deletion, an operator's mistake), the
// controller's periodic verification sends it again.
func TestControllerRestoresMissingExports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a", "--lease-duration=6s", "--renew-interval=2s", "--verify-exports-every=1")...)
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"), slice("dynamo", "svc", "svc-x", "10.1.0.1"))
	waitRegistryExports(t, reg, "[use1-a:dynamo/svc:10.1.0.1]")
	req, _ := http.NewRequest(http.MethodDelete, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters/use1-a/exports/dynamo/svc", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete export behind the controller's back: %v %v", resp, err)
	}
	resp.Body.Close()
	start := time.Now()
	waitRegistryExports(t, reg, "[use1-a:dynamo/svc:10.1.0.1]")
	t.Logf("export restored %s after it went missing", time.Since(start).Round(10*time.Millisecond))
}

// TestControllerLimitRefusal: an export the registry refuses for a per-cluster limit shows
// Ready=False Failed with the registry's message and an ExportFailed Event; it is sent
// again (every 30 s) and exported once the cluster is back under the limit.
func TestControllerLimitRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--max-exports-per-cluster=1")
	cl := memberCluster(t, ctx)
	cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a")...)
	mustCreate(t, cl, service("dynamo", "first", 80), serviceExport("dynamo", "first"), slice("dynamo", "first", "first-x", "10.1.0.1"))
	waitExport(t, cl, "dynamo", "first", readyConditions, 30*time.Second)
	mustCreate(t, cl, service("dynamo", "second", 80), serviceExport("dynamo", "second"), slice("dynamo", "second", "second-x", "10.1.0.2"))
	se := waitExport(t, cl, "dynamo", "second", "Valid=True Valid\nReady=False Failed\nConflict=False NoConflicts", 30*time.Second)
	if msg := findCondition(se, "Ready").Message; !strings.Contains(msg, "--max-exports-per-cluster") {
		t.Fatalf("Ready message %q does not name the limit", msg)
	}
	waitEvent(t, cl, "dynamo", "second", "ExportFailed", "at most 1 per cluster (--max-exports-per-cluster)")
	if err := cl.Client.Delete(ctx, serviceExport("dynamo", "first")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitExport(t, cl, "dynamo", "second", readyConditions, 45*time.Second)
	t.Logf("exported %s after the cluster went back under the limit", time.Since(start).Round(100*time.Millisecond))
	waitRegistryExports(t, reg, "[use1-a:dynamo/second:10.1.0.2]")
}

// TestControllerLeavesASilentRegistry: the registry URL the controller uses goes silent —
// its connection stays open and nothing is refused, but no byte passes either way (a
// forwarder that stops forwarding, a region whose network drops packets). The controller
// must not wait for its call timeout or TCP keepalives: its health checks on the session
// find the silence and it fails over to the next URL, registers there and sends its
// exports. The test prints the figure, from the silence to the exports in the other registry.
func TestControllerLeavesASilentRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first := harness.StartRegistry(t, "--store=memory")
	front := harness.Forward(t, first.GRPCAddr)
	second := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	// The defaults that matter here: --registry-call-timeout=10s, a renewal every 10 s.
	ctl := cl.StartController(t, "mcs-controller",
		"--registry-url=http://"+front.Addr, "--registry-url=http://"+second.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1")
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	waitExport(t, cl, "dynamo", "svc", readyConditions, 30*time.Second)
	waitRegistryExports(t, first, "[use1-a:dynamo/svc:]")

	front.SetSilent(true)
	silent := time.Now()
	harness.Eventually(t, "the controller on the second registry", 60*time.Second, func() string {
		if _, body := get(t, "http://"+ctl.MetricsAddr+"/metrics"); !strings.Contains(body, `mcs_controller_registry_active{url="http://`+second.GRPCAddr+`"} 1`) {
			return grepLines(body, "mcs_controller_registry_active")
		}
		return ""
	})
	failover := time.Since(silent)
	waitRegistryExports(t, second, "[use1-a:dynamo/svc:]")
	took := time.Since(silent)
	t.Logf("FIGURE silent registry: failover %.1f s after the silence, exports in the next registry after %.1f s (health checks every 1 s with a 2 s timeout; call timeout 10 s)", failover.Seconds(), took.Seconds())
	// Failing over on the call timeout alone takes 10-20 s (the next renewal, then its
	// timeout); the health checks must do better than the call timeout.
	if took > 10*time.Second {
		t.Errorf("the controller left a silent registry after %s; want it found by the session's health checks, within a few seconds", took.Round(100*time.Millisecond))
	}
	// The import watch moved too: a new export comes back as an import through the second registry.
	mustCreate(t, cl, service("dynamo", "after", 80), serviceExport("dynamo", "after"))
	waitRegistryExports(t, second, "[use1-a:dynamo/after: use1-a:dynamo/svc:]")
	harness.Eventually(t, "the import of the new export", 30*time.Second, func() string {
		var si mcsv1beta1.ServiceImport
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "after"}, &si); err != nil {
			return err.Error()
		}
		return ""
	})
}
