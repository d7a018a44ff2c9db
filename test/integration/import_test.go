package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// importState renders what a cluster imported for a Service: the ServiceImport (type, ports,
// clusters), the derived Service, and each source cluster's endpoints with readiness.
func importState(t *testing.T, c *harness.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	si := &mcsv1beta1.ServiceImport{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
		if apierrors.IsNotFound(err) {
			return "none"
		}
		t.Fatal(err)
	}
	var ports []string
	for _, p := range si.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port))
	}
	var clusters []string
	for _, cl := range si.Status.Clusters {
		clusters = append(clusters, cl.Cluster)
	}
	derived := si.Annotations["multicluster.kubernetes.io/derived-service"]
	var svc corev1.Service
	svcState := "no-derived-service"
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: derived}, &svc); err == nil {
		svcState = fmt.Sprintf("svc:%v", len(svc.Spec.Selector) == 0 && svc.Labels["multicluster.kubernetes.io/service-name"] == name)
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{"multicluster.kubernetes.io/service-name": name}); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, s := range slices.Items {
		if s.Labels[discoveryv1.LabelServiceName] != derived || s.Labels[discoveryv1.LabelManagedBy] != "mcs-controller.dynamo.nvidia.com" {
			continue
		}
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s:%s:%v", s.Labels["multicluster.kubernetes.io/source-cluster"], e.Addresses[0], e.Conditions.Ready != nil && *e.Conditions.Ready))
		}
	}
	sort.Strings(eps)
	ips := "no-ips"
	if len(si.Spec.IPs) > 0 {
		ips = "ips"
	}
	return fmt.Sprintf("%s %v clusters=%v %s %s %v", si.Spec.Type, ports, clusters, ips, svcState, eps)
}

func waitImport(t *testing.T, c *harness.Cluster, ns, name, want string) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("%s: import of %s/%s", c.Name, ns, name), 30*time.Second, func() string {
		if got := importState(t, c, ns, name); got != want {
			return " got: " + got + "\nwant: " + want
		}
		return ""
	})
}

// TestImportPath: two clusters, two controllers, one registry.
func TestImportPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a", "usw2-a"}})
	a, b := cls[0], cls[1]
	for _, c := range cls {
		createNamespaces(t, ctx, c.Client, "dynamo")
	}
	// A ServiceImport of another implementation in both clusters: A adopts it, B leaves it.
	for _, c := range cls {
		mustCreate(t, c, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "taken"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 1, Protocol: corev1.ProtocolTCP}}}})
	}
	ctlA := a.StartController(t, "mcs-controller/use1-a", controllerArgs(reg, "use1-a", "--adopt-unmanaged-imports")...)
	ctlB := b.StartController(t, "mcs-controller/usw2-a", controllerArgs(reg, "usw2-a", "--create-namespaces", "--lease-duration=6s", "--renew-interval=2s")...)

	// Exported from A: imported in A and B.
	mustCreate(t, a, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-a", "10.1.0.1", "10.1.0.2"))
	both := "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true [use1-a:10.1.0.1:true use1-a:10.1.0.2:true]"
	waitImport(t, a, "dynamo", "relay", both)
	waitImport(t, b, "dynamo", "relay", both)
	si := &mcsv1beta1.ServiceImport{}
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "relay"}, si); err != nil {
		t.Fatal(err)
	}
	if d := si.Annotations["multicluster.kubernetes.io/derived-service"]; len(d) != len("derived-")+10 || !strings.HasPrefix(d, "derived-") {
		t.Fatalf("derived Service name %q", d)
	}
	if c := findImportCondition(si); c != "Ready=True Ready" {
		t.Fatalf("ServiceImport condition %s", c)
	}
	if _, ok := si.Labels["multicluster.kubernetes.io/service-name"]; ok {
		t.Fatal("the ServiceImport carries the service-name label")
	}

	// An endpoint becoming unready in A flips in B.
	var s discoveryv1.EndpointSlice
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "relay-a"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Endpoints[1].Conditions.Ready = ptr.To(false)
	if err := a.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	waitImport(t, b, "dynamo", "relay", "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true [use1-a:10.1.0.1:true use1-a:10.1.0.2:false]")

	// A second exporter adds its slice set; its different port is a conflict, and the
	// oldest export's spec stays.
	mustCreate(t, b, service("dynamo", "relay", 81), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-b", "10.2.0.1"))
	two := "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:true use1-a:10.1.0.2:false usw2-a:10.2.0.1:true]"
	waitImport(t, a, "dynamo", "relay", two)
	waitImport(t, b, "dynamo", "relay", two)
	waitExport(t, b, "dynamo", "relay", "Valid=True Valid\nReady=True Ready\nConflict=True PortConflict", 30*time.Second)

	// Namespace hold in A (no --create-namespaces); B creates the namespace itself.
	createNamespaces(t, ctx, b.Client, "only-in-b")
	mustCreate(t, b, service("only-in-b", "svc", 80), serviceExport("only-in-b", "svc"), slice("only-in-b", "svc", "svc-b", "10.2.1.1"))
	onlyB := "ClusterSetIP [http/TCP/80] clusters=[usw2-a] ips svc:true [usw2-a:10.2.1.1:true]"
	waitImport(t, b, "only-in-b", "svc", onlyB)
	waitMetric(t, ctlA.MetricsAddr, `mcs_controller_imports_held{reason="namespace_missing"} 1`)
	createNamespaces(t, ctx, a.Client, "only-in-b")
	waitImport(t, a, "only-in-b", "svc", onlyB)
	// --create-namespaces in B: an export from A into a namespace B lacks.
	createNamespaces(t, ctx, a.Client, "only-in-a")
	mustCreate(t, a, service("only-in-a", "svc", 80), serviceExport("only-in-a", "svc"))
	waitImport(t, b, "only-in-a", "svc", "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true []")

	// The ServiceImport of another owner: A adopted it, B left it alone.
	mustCreate(t, a, service("dynamo", "taken", 80), serviceExport("dynamo", "taken"))
	waitImport(t, a, "dynamo", "taken", "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true []")
	waitMetric(t, ctlB.MetricsAddr, `mcs_controller_imports_held{reason="unmanaged"} 1`)
	if got := importState(t, b, "dynamo", "taken"); got != "ClusterSetIP [/TCP/1] clusters=[] no-ips no-derived-service []" {
		t.Fatalf("B changed a ServiceImport it does not own: %s", got)
	}

	// A no-change resync writes nothing: restart B's controller and compare every
	// imported object's resourceVersion.
	time.Sleep(2 * time.Second)
	before := resourceVersions(t, b)
	ctlB.Stop(10 * time.Second)
	ctlB = b.StartController(t, "mcs-controller/usw2-a-restarted", controllerArgs(reg, "usw2-a", "--create-namespaces", "--lease-duration=6s", "--renew-interval=2s")...)
	waitOutput(t, ctlB.Process, `"msg":"import resync"`)
	time.Sleep(3 * time.Second)
	if after := resourceVersions(t, b); after != before {
		t.Fatalf("a restart with nothing changed rewrote imported objects:\nbefore %s\nafter  %s", before, after)
	}

	// B's controller stops: after its 6 s lease, its slices leave A.
	ctlB.Stop(10 * time.Second)
	waitImport(t, a, "dynamo", "relay", "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true [use1-a:10.1.0.1:true use1-a:10.1.0.2:false]")
	waitImport(t, a, "only-in-b", "svc", "none")

	// Unexport: A's ServiceExport deleted; the import leaves every cluster, derived Service
	// and slices included.
	if err := a.Client.Delete(ctx, serviceExport("dynamo", "relay")); err != nil {
		t.Fatal(err)
	}
	waitImport(t, a, "dynamo", "relay", "none")
	var left discoveryv1.EndpointSliceList
	if err := a.Client.List(ctx, &left, client.MatchingLabels{"multicluster.kubernetes.io/service-name": "relay"}); err != nil || len(left.Items) != 0 {
		t.Fatalf("slices left after unexport: %d %v", len(left.Items), err)
	}
	var svcs corev1.ServiceList
	if err := a.Client.List(ctx, &svcs, client.MatchingLabels{"multicluster.kubernetes.io/service-name": "relay"}); err != nil || len(svcs.Items) != 0 {
		t.Fatalf("derived Services left after unexport: %d %v", len(svcs.Items), err)
	}
}

func findImportCondition(si *mcsv1beta1.ServiceImport) string {
	for _, c := range si.Status.Conditions {
		if c.Type == "Ready" {
			return fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		}
	}
	return "none"
}

func waitMetric(t *testing.T, addr, line string) {
	t.Helper()
	harness.Eventually(t, "metric "+line, 30*time.Second, func() string {
		if _, body := get(t, "http://"+addr+"/metrics"); !strings.Contains(body, line) {
			return grepLines(body, "mcs_controller_")
		}
		return ""
	})
}

// resourceVersions lists the resourceVersion of every ServiceImport, Service and
// EndpointSlice in the cluster's non-system namespaces.
func resourceVersions(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	var sis mcsv1beta1.ServiceImportList
	var svcs corev1.ServiceList
	var slices discoveryv1.EndpointSliceList
	for _, l := range []client.ObjectList{&sis, &svcs, &slices} {
		if err := c.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range sis.Items {
		out = append(out, "si/"+o.Namespace+"/"+o.Name+"="+o.ResourceVersion)
	}
	for _, o := range svcs.Items {
		if o.Namespace != "default" {
			out = append(out, "svc/"+o.Namespace+"/"+o.Name+"="+o.ResourceVersion)
		}
	}
	for _, o := range slices.Items {
		if o.Namespace != "default" {
			out = append(out, "slice/"+o.Namespace+"/"+o.Name+"="+o.ResourceVersion)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestImportLongNameAndHeadless: a 63-character Service name works, and a headless export
// gets a headless derived Service and no ClusterSetIP.
func TestImportLongNameAndHeadless(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := memberCluster(t, ctx)
	cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a")...)
	long := strings.Repeat("a", 63)
	svc := service("dynamo", long, 80)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	mustCreate(t, cl, svc, serviceExport("dynamo", long), slice("dynamo", long, "long-x", "10.1.0.1"))
	waitImport(t, cl, "dynamo", long, "Headless [http/TCP/80] clusters=[use1-a] no-ips svc:true [use1-a:10.1.0.1:true]")
	var list corev1.ServiceList
	if err := cl.Client.List(ctx, &list, client.MatchingLabels{"multicluster.kubernetes.io/service-name": long}); err != nil || len(list.Items) != 1 || list.Items[0].Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("derived Service of a headless import: %+v %v", list.Items, err)
	}
}

// TestImportSnapshotInPages: a controller that starts against more imports than one page
// of the registry's snapshot (256) imports them all, not only the last page's.
func TestImportSnapshotInPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "usw2-a", LeaseDuration: durationpb.New(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const services = 300
	req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "usw2-a"}
	for i := range services {
		req.Exports = append(req.Exports, &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%03d", i)},
			Spec: relaySpec(80), EndpointGroups: endpoints(fmt.Sprintf("10.2.%d.%d", i/250, i%250))})
	}
	if _, err := c.SyncExports(ctx, req); err != nil {
		t.Fatal(err)
	}
	cl := memberCluster(t, ctx)
	cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a")...)
	harness.Eventually(t, "every import in the cluster", 2*time.Minute, func() string {
		var list mcsv1beta1.ServiceImportList
		if err := cl.Client.List(ctx, &list, client.InNamespace("dynamo")); err != nil {
			return err.Error()
		}
		if len(list.Items) != services {
			return fmt.Sprintf("%d ServiceImports, want %d", len(list.Items), services)
		}
		return ""
	})
}
