// Package chart tests the Helm chart with the real helm binary and a real kube-apiserver:
// every install of the user manual renders, its objects are accepted by the API server, and
// the rendered flags match the values.
package chart

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func chartDir(t *testing.T) string {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "global-discovery-mcs")
}

// helmTemplate renders the chart with the manual's --set flags in namespace mcs-system.
func helmTemplate(t *testing.T, release string, sets ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", "mcs-system"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(harness.Binary(t, "helm"), args...).CombinedOutput()
	return string(out), err
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("decode rendered document: %v\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// args returns the container args of a rendered Deployment.
func args(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	return nil
}

func has(list []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(list, w) {
			return false
		}
	}
	return true
}

const img = "image.repository=my-registry.example.com/global-discovery-mcs"

// The installs of the manual, in order.
var installs = []struct {
	name, release  string
	sets           []string
	registryArgs   []string
	controllerArgs []string
}{
	{"memory registry, plaintext", "mcs-registry",
		[]string{"registry.enabled=true", "controller.enabled=false", img, "image.tag=dev"},
		[]string{"--store=memory", "--grpc-addr=:9090", "--rest-addr=:8080", "--admin-addr=:9091"}, nil},
	{"dynamodb registry, TLS", "mcs-registry",
		[]string{"registry.enabled=true", "controller.enabled=false", "registry.store=dynamodb", "registry.dynamodb.table=global-discovery-mcs", "registry.tls.secretName=mcs-registry-tls", img, "image.tag=dev"},
		[]string{"--store=dynamodb", "--dynamodb-table=global-discovery-mcs", "--tls-cert-file=/etc/mcs-registry/tls/tls.crt", "--tls-key-file=/etc/mcs-registry/tls/tls.key"}, nil},
	{"controller, TLS with a CA ConfigMap", "mcs-controller",
		[]string{"registry.enabled=false", "controller.enabled=true", "controller.registryUrls={https://mcs-registry.example.internal:9090}", "controller.registryTlsCa.configMapName=mcs-registry-ca", "controller.clustersetId=prod", "controller.clusterId=use1-a", "controller.region=us-east-1", img, "image.tag=dev"},
		nil, []string{"--registry-url=https://mcs-registry.example.internal:9090", "--registry-tls-ca-file=/etc/mcs-controller/registry-ca/ca.crt", "--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1"}},
	{"controller, TLS with a CA Secret and key", "mcs-controller",
		[]string{"registry.enabled=false", "controller.enabled=true", "controller.registryUrls={https://global.example:9090,https://use1.example:9090}", "controller.registryTlsCa.secretName=registry-ca", "controller.registryTlsCa.key=bundle.pem", "controller.clustersetId=prod", "controller.clusterId=use1-a", img},
		nil, []string{"--registry-url=https://global.example:9090", "--registry-url=https://use1.example:9090", "--registry-tls-ca-file=/etc/mcs-controller/registry-ca/bundle.pem"}},
	{"controller, plaintext", "mcs-controller",
		[]string{"registry.enabled=false", "controller.enabled=true", "controller.registryUrls={http://mcs-registry.example.internal:9090}", "controller.registryAllowInsecureHttp=true", "controller.clustersetId=prod", "controller.clusterId=use1-a", "controller.region=us-east-1", img, "image.tag=dev"},
		nil, []string{"--registry-url=http://mcs-registry.example.internal:9090", "--registry-allow-insecure-http", "--clusterset-id=prod"}},
	{"registry and controller in one release, plaintext", "global-discovery-mcs",
		[]string{"registry.enabled=true", "controller.enabled=true", "controller.registryAllowInsecureHttp=true", "controller.clustersetId=prod", "controller.clusterId=use1-a", "controller.watchNamespaces={dynamo,global-discovery}", "controller.createNamespaces=true", "controller.adoptUnmanagedImports=true", img},
		[]string{"--store=memory"}, []string{"--registry-url=http://mcs-registry.mcs-system.svc:9090", "--registry-allow-insecure-http", "--watch-namespaces=dynamo,global-discovery", "--create-namespaces", "--adopt-unmanaged-imports"}},
	{"registry and controller in one release, TLS", "global-discovery-mcs",
		[]string{"registry.enabled=true", "controller.enabled=true", "registry.tls.secretName=mcs-registry-tls", "controller.registryTlsCa.configMapName=mcs-registry-ca", "controller.clustersetId=prod", "controller.clusterId=use1-a", img},
		[]string{"--tls-cert-file=/etc/mcs-registry/tls/tls.crt"}, []string{"--registry-url=https://mcs-registry.mcs-system.svc:9090", "--registry-tls-ca-file=/etc/mcs-controller/registry-ca/ca.crt"}},
	{"registry and controller in one release, mutual TLS", "global-discovery-mcs",
		[]string{"registry.enabled=true", "controller.enabled=true", "registry.tls.secretName=mcs-registry-tls", "registry.tls.clientCaConfigMapName=mcs-client-ca", "registry.tls.trustDomain=example.org", "registry.tls.adminIdentities={spiffe://example.org/ops}", "controller.registryTlsCa.configMapName=mcs-registry-ca", "controller.registryTlsClientCert.secretName=mcs-controller-client", "controller.clustersetId=prod", "controller.clusterId=use1-a", img},
		[]string{"--client-ca-file=/etc/mcs-registry/client-ca/ca.crt", "--trust-domain=example.org", "--admin-identities=spiffe://example.org/ops"},
		[]string{"--registry-tls-cert-file=/etc/mcs-controller/client-cert/tls.crt", "--registry-tls-key-file=/etc/mcs-controller/client-cert/tls.key"}},
}

// TestManualInstalls renders every install of the manual, checks the flags, lints it, and
// creates every object in a real API server.
func TestManualInstalls(t *testing.T) {
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i, in := range installs {
		t.Run(in.name, func(t *testing.T) {
			out, err := helmTemplate(t, in.release, in.sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			objs := decode(t, out)
			if got := args(t, objs, "mcs-registry"); !has(got, in.registryArgs...) || (in.registryArgs == nil) != (got == nil) {
				t.Fatalf("registry args %v, want %v", got, in.registryArgs)
			}
			if got := args(t, objs, "mcs-controller"); !has(got, in.controllerArgs...) || (in.controllerArgs == nil) != (got == nil) {
				t.Fatalf("controller args %v, want %v", got, in.controllerArgs)
			}
			if got := args(t, objs, "mcs-controller"); got != nil && slices.Contains(got, "--registry-allow-insecure-http") != slices.Contains(in.sets, "controller.registryAllowInsecureHttp=true") {
				t.Fatalf("controller args %v: --registry-allow-insecure-http does not follow the value", got)
			}
			lint := append([]string{"lint", chartDir(t), "--strict", "--namespace", "mcs-system"}, setFlags(in.sets)...)
			if out, err := exec.Command(harness.Binary(t, "helm"), lint...).CombinedOutput(); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			// Each install into its own namespace of the one API server: every object is
			// valid for it (CRDs once).
			ns := strings.ReplaceAll(in.release, "global-discovery-mcs", "gdmcs") + "-" + string(rune('a'+i))
			createNamespace(t, ctx, cl, ns)
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" && i > 0 {
					continue
				}
				if o.GetNamespace() != "" {
					o.SetNamespace(ns)
				}
				if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" {
					o.SetName(ns + "-" + o.GetName())
				}
				if err := cl.Client.Create(ctx, o); err != nil {
					t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}

func setFlags(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

func createNamespace(t *testing.T, ctx context.Context, cl *harness.Cluster, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	if err := cl.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
}

// TestRefusals: the chart refuses what the manual says it refuses, with a clear message.
func TestRefusals(t *testing.T) {
	tests := []struct {
		sets []string
		want string
	}{
		{[]string{"registry.enabled=false", "controller.registryUrls={http://mcs-registry.example.internal:9090}"}, `"http://mcs-registry.example.internal:9090" is plaintext http://; use an https:// URL, or set controller.registryAllowInsecureHttp=true`},
		{[]string{"registry.store=memory", "registry.replicas=2", "controller.enabled=false"}, "registry.replicas: the memory store runs exactly one replica"},
		{[]string{"registry.enabled=false", "controller.enabled=true"}, "controller.registryUrls: required when registry.enabled=false"},
		{[]string{"registry.store=etcd"}, "'/registry/store': value must be one of 'memory', 'dynamodb'"},
		{[]string{"registry.replica=2"}, "additional properties 'replica' not allowed"},
		{[]string{"controller.registryUrls={mcs-registry:9090}", "registry.enabled=false"}, "'mcs-registry:9090' does not match pattern '^https?://'"},
		{[]string{"controller.registryTlsCa.configMapName=a", "controller.registryTlsCa.secretName=b", "registry.enabled=false", "controller.registryUrls={https://r:9090}"}, "set configMapName or secretName, not both"},
		{[]string{"registry.tls.clientCaConfigMapName=c", "registry.tls.trustDomain=example.org", "controller.enabled=false"}, "registry.tls.clientCaConfigMapName: needs registry.tls.secretName"},
		{[]string{"registry.tls.secretName=t", "registry.tls.clientCaConfigMapName=c", "controller.enabled=false"}, "registry.tls.trustDomain: required"},
	}
	for _, tc := range tests {
		out, err := helmTemplate(t, "x", tc.sets...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("helm template %v: err=%v\n%s\nwant a failure containing %q", tc.sets, err, out, tc.want)
		}
	}
}

// TestDefaultValuesRender: `helm template` with no values refuses, naming the opt-in: its
// controller would dial the release's registry in plaintext, which the user manual says
// the chart refuses without controller.registryAllowInsecureHttp. With it, a registry and
// a controller that dials it in the cluster.
func TestDefaultValuesRender(t *testing.T) {
	out, err := helmTemplate(t, "x")
	if err == nil || !strings.Contains(out, "controller.registryAllowInsecureHttp: the controller dials this release's registry in plaintext") {
		t.Fatalf("helm template with the default values: %v\n%s\nwant the refusal naming controller.registryAllowInsecureHttp", err, out)
	}
	out, err = helmTemplate(t, "x", "controller.registryAllowInsecureHttp=true")
	if err != nil {
		t.Fatalf("helm template with the opt-in: %v\n%s", err, out)
	}
	for _, want := range []string{"--registry-url=http://mcs-registry.mcs-system.svc:9090", "--registry-allow-insecure-http", "name: mcs-registry", "name: mcs-controller"} {
		if !strings.Contains(out, want) {
			t.Errorf("render with the opt-in lacks %q", want)
		}
	}
}

// TestCRDs: the chart's CRDs are the mcs-api v0.5.2 ones (plus ClusterProperty), kept on
// uninstall, and crds.install=false leaves them out.
func TestCRDs(t *testing.T) {
	out, err := helmTemplate(t, "x", "controller.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	want, err := harness.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, o := range decode(t, out) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall", crd.Name)
		}
		got[crd.Name] = &crd
	}
	for _, w := range want {
		g := got[w.Name]
		if g == nil || !reflect.DeepEqual(g.Spec, w.Spec) {
			t.Errorf("CRD %s differs from the module's", w.Name)
		}
	}
	if len(got) != 3 {
		t.Errorf("%d CRDs, want 3", len(got))
	}
	out, err = helmTemplate(t, "x", "controller.enabled=false", "crds.install=false")
	if err != nil || strings.Contains(out, "CustomResourceDefinition") {
		t.Fatalf("crds.install=false still renders CRDs: %v", err)
	}
}

// TestHelmUnittest runs the chart's helm-unittest suites (charts/global-discovery-mcs/tests).
func TestHelmUnittest(t *testing.T) {
	out, err := exec.Command(harness.Binary(t, "helm-unittest"), chartDir(t)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Charts:      1 passed, 1 total") {
		t.Fatalf("helm-unittest: %v\n%s", err, out)
	}
}
