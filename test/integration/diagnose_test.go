package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// mergedKubeconfig writes one kubeconfig whose contexts are the clusters' names.
func mergedKubeconfig(t *testing.T, cls []*harness.Cluster) string {
	t.Helper()
	out := clientcmdapi.NewConfig()
	for _, c := range cls {
		cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		out.Clusters[c.Name] = cfg.Clusters[ctx.Cluster]
		out.AuthInfos[c.Name] = cfg.AuthInfos[ctx.AuthInfo]
		out.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	out.CurrentContext = cls[0].Name
	path := filepath.Join(t.TempDir(), "clusterset.kubeconfig")
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		t.Fatal(err)
	}
	return path
}

type diagnosis struct {
	Results []struct {
		Target, Check, Status, Detail, Fix string
	}
}

// runDiagnose runs the real mcs-admin diagnose -o json and returns its report and exit code.
func runDiagnose(t *testing.T, args ...string) (diagnosis, int, string) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, "mcs-admin"), append(args, "-o", "json")...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var d diagnosis
	if err := json.Unmarshal([]byte(stdout.String()), &d); err != nil {
		t.Fatalf("diagnose output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	return d, code, stdout.String()
}

// find returns the status and detail of one check.
func (d diagnosis) find(target, check string) (string, string, string) {
	for _, r := range d.Results {
		if r.Target == target && r.Check == check {
			return r.Status, r.Detail, r.Fix
		}
	}
	return "missing", "", ""
}

// TestDiagnose: mcs-admin diagnose against a TLS registry and three clusters: all OK and
// exit 0 on a healthy clusterset; then one fault per check, each reported with its fix and
// exit 1: a wrong CA, a conflict, a v1alpha1-only CRD, an expired lease, a missing
// permission.
func TestDiagnose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ca := harness.NewCA(t, "registry")
	certFile, keyFile := ca.IssueServer(t, "mcs-registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile)
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)
	ids := []string{"use1-a", "usw2-a", "old"}
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: ids})
	var ctls []*harness.Controller
	for i, c := range cls[:2] {
		createNamespaces(t, ctx, c.Client, "dynamo")
		ctls = append(ctls, c.StartController(t, "mcs-controller/"+ids[i], "--registry-url=https://localhost:"+grpcPort, "--registry-tls-ca-file="+ca.CertFile,
			"--clusterset-id=prod", "--cluster-id="+ids[i], "--region=r", "--lease-duration=6s", "--renew-interval=2s"))
		mustCreate(t, c, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-"+ids[i], fmt.Sprintf("10.%d.0.1", i+1)))
	}
	for _, c := range cls[:2] {
		waitImport(t, c, "dynamo", "relay", "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]")
	}
	kubeconfig := mergedKubeconfig(t, cls)
	base := []string{"--registry-rest-url=https://localhost:" + restPort, "--registry-tls-ca-file=" + ca.CertFile,
		"diagnose", "--clusterset-id=prod", "--kubeconfig=" + kubeconfig, "--context=use1-a", "--context=usw2-a",
		"--gds-router-namespace=dynamo", "--gds-router-service=relay", "--gds-router-port-name=http"}

	// Healthy: every check OK, exit 0.
	d, code, out := runDiagnose(t, base...)
	if code != 0 {
		t.Fatalf("diagnose of a healthy clusterset exited %d:\n%s", code, out)
	}
	for _, check := range []string{"connection", "certificate", "clock"} {
		if s, detail, _ := d.find("registry", check); s != "OK" {
			t.Errorf("registry %s: %s %s", check, s, detail)
		}
	}
	for _, id := range ids[:2] {
		for _, check := range []string{"crds", "controller", "registry-lease", "version-skew", "exports", "imports", "permissions", "gds", "clock", "locality"} {
			if s, detail, _ := d.find(id, check); s != "OK" {
				t.Errorf("%s %s: %s %s", id, check, s, detail)
			}
		}
	}
	table, err := exec.Command(harness.Binary(t, "mcs-admin"), base...).CombinedOutput()
	if err != nil {
		t.Fatalf("diagnose as a table: %v\n%s", err, table)
	}
	t.Logf("diagnose of a healthy clusterset:\n%s", table)
	if _, detail, _ := d.find("use1-a", "gds"); detail != "0 pool(s), 2 router(s)" {
		t.Errorf("gds: %s, want the two clusters' routers", detail)
	}

	// The nodes' zones, read after the controller started: use1-a's own endpoints (its
	// tier, cluster) are hinted for every zone of its nodes, usw2-a's away. A zone that
	// changes is followed; a node without a zone defeats the hints, which the import and
	// diagnose say.
	const active, inactive = "multicluster.dynamo.nvidia.com-active", "multicluster.dynamo.nvidia.com-inactive"
	waitHints(t, cls[0], "dynamo", "relay", "Locality=True Cluster use1-a:"+active+" usw2-a:"+inactive)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "z1"}}}
	mustCreate(t, cls[0], node)
	waitHints(t, cls[0], "dynamo", "relay", "Locality=True Cluster use1-a:z1 usw2-a:"+inactive)
	node.Labels[corev1.LabelTopologyZone] = "z2"
	if err := cls[0].Client.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitHints(t, cls[0], "dynamo", "relay", "Locality=True Cluster use1-a:z2 usw2-a:"+inactive)
	mustCreate(t, cls[0], &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	waitHints(t, cls[0], "dynamo", "relay", "Locality=False HintsUnavailable use1-a:z2 usw2-a:"+inactive)
	d, code, _ = runDiagnose(t, base...)
	if s, detail, fix := d.find("use1-a", "locality"); code != 1 || s != "WARN" || !strings.Contains(detail, "1 of 2 nodes have no topology.kubernetes.io/zone label (node-b)") || fix == "" {
		t.Errorf("a node without a zone: exit %d, locality %s %s", code, s, detail)
	}
	if s, detail, _ := d.find("usw2-a", "locality"); s != "OK" {
		t.Errorf("usw2-a, without nodes: locality %s %s", s, detail)
	}
	if err := cls[0].Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}); err != nil {
		t.Fatal(err)
	}
	waitHints(t, cls[0], "dynamo", "relay", "Locality=True Cluster use1-a:z2 usw2-a:"+inactive)

	// A client certificate that expires in 3 days.
	certPEM, _ := ca.IssueClient(t, "use1-a", nil, time.Now().Add(72*time.Hour))
	pemBytes, err := os.ReadFile(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, cls[0], &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: "mcs-controller-client-cert"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: pemBytes, corev1.TLSPrivateKeyKey: []byte("unused")}})
	d, code, _ = runDiagnose(t, append(slices.Clone(base), "--controller-client-cert-secret=mcs-controller-client-cert")...)
	if s, detail, fix := d.find("use1-a", "client-certificate"); code != 1 || s != "WARN" || !strings.Contains(detail, "CN=use1-a") || fix == "" {
		t.Errorf("expiring client certificate: exit %d, client-certificate %s %s", code, s, detail)
	}

	// A wrong CA.
	other := harness.NewCA(t, "other")
	wrong := append([]string{"--registry-rest-url=https://localhost:" + restPort, "--registry-tls-ca-file=" + other.CertFile}, base[2:]...)
	d, code, _ = runDiagnose(t, wrong...)
	if s, detail, fix := d.find("registry", "connection"); code != 1 || s != "FAIL" || !strings.Contains(fix, "--registry-tls-ca-file") {
		t.Errorf("wrong CA: exit %d, connection %s %s (fix %q)", code, s, detail, fix)
	}

	// A conflict: usw2-a exports a Service of the same name with another port.
	mustCreate(t, cls[1], service("dynamo", "clash", 81), serviceExport("dynamo", "clash"))
	mustCreate(t, cls[0], service("dynamo", "clash", 80), serviceExport("dynamo", "clash"))
	harness.Eventually(t, "the conflict reported", 30*time.Second, func() string {
		d, code, _ = runDiagnose(t, base...)
		if s, detail, _ := d.find("usw2-a", "exports"); code != 1 || s != "WARN" || !strings.Contains(detail, "dynamo/clash") {
			return fmt.Sprintf("exit %d, exports %s %s", code, s, detail)
		}
		return ""
	})

	// A v1alpha1-only CRD, in a cluster of its own.
	onlyV1alpha1(t, ctx, cls[2], "serviceimports.multicluster.x-k8s.io")
	d, code, _ = runDiagnose(t, "diagnose", "--kubeconfig="+kubeconfig, "--context=old")
	if s, detail, fix := d.find("old", "crds"); code != 1 || s != "FAIL" || !strings.Contains(detail, "serves v1alpha1, not v1beta1") || fix == "" {
		t.Errorf("v1alpha1-only CRD: exit %d, crds %s %s", code, s, detail)
	}

	// An expired lease: usw2-a's controller stops.
	if err := ctls[1].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the expired lease reported", 30*time.Second, func() string {
		d, _, _ = runDiagnose(t, base...)
		if s, detail, _ := d.find("usw2-a", "registry-lease"); s != "FAIL" || !strings.Contains(detail, "lease expired") {
			return fmt.Sprintf("registry-lease %s %s", s, detail)
		}
		return ""
	})

	// A missing permission: the controller's ClusterRoleBinding is gone in use1-a.
	crb := &unstructured.Unstructured{}
	crb.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"})
	crb.SetName(harness.ReleaseNamespace + "-mcs-controller")
	if err := cls[0].Client.Delete(ctx, crb); err != nil {
		t.Fatal(err)
	}
	d, code, _ = runDiagnose(t, base...)
	if s, detail, _ := d.find("use1-a", "permissions"); code != 1 || s != "FAIL" || !strings.Contains(detail, "list services.core") {
		t.Errorf("missing permission: exit %d, permissions %s %s", code, s, detail)
	}
}

// waitHints waits until a ServiceImport's Locality condition and its imported slices' zone
// hints (source cluster: zones) are want.
func waitHints(t *testing.T, c *harness.Cluster, ns, name, want string) {
	t.Helper()
	harness.Eventually(t, "hints "+want, 30*time.Second, func() string {
		ctx := context.Background()
		si := &mcsv1beta1.ServiceImport{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
			return err.Error()
		}
		got := []string{"Locality=none"}
		if cond := meta.FindStatusCondition(si.Status.Conditions, "Locality"); cond != nil {
			got[0] = fmt.Sprintf("Locality=%s %s", cond.Status, cond.Reason)
		}
		var list discoveryv1.EndpointSliceList
		if err := c.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"multicluster.kubernetes.io/service-name": name}); err != nil {
			return err.Error()
		}
		var hints []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				var zones []string
				if e.Hints != nil {
					for _, z := range e.Hints.ForZones {
						zones = append(zones, z.Name)
					}
				}
				hints = append(hints, s.Labels["multicluster.kubernetes.io/source-cluster"]+":"+strings.Join(zones, "+"))
			}
		}
		slices.Sort(hints)
		if got := strings.Join(append(got, hints...), " "); got != want {
			return got
		}
		return ""
	})
}

// onlyV1alpha1 replaces a CRD of the cluster with one that serves only v1alpha1, as some
// other installations have it.
func onlyV1alpha1(t *testing.T, ctx context.Context, c *harness.Cluster, name string) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var kept []any
	for _, v := range versions {
		m := v.(map[string]any)
		if m["name"] == "v1alpha1" {
			m["served"], m["storage"] = true, true
			kept = append(kept, m)
		}
	}
	if err := c.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the CRD deleted", 30*time.Second, func() string {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there: %v", err)
		}
		return ""
	})
	fresh := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name}, "spec": crd.Object["spec"]}}
	if err := unstructured.SetNestedSlice(fresh.Object, kept, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
}
