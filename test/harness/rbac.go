package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReleaseNamespace is the namespace the tests install the chart's RBAC into, and the
// controller's leader-election namespace.
const ReleaseNamespace = "mcs-system"

var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// RenderChart renders charts/global-discovery-mcs with helm template (release "mcs",
// namespace ReleaseNamespace) and the --set values.
func RenderChart(tb testing.TB, sets ...string) []*unstructured.Unstructured {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	args := []string{"template", "mcs", filepath.Join(root, "charts", "global-discovery-mcs"), "--namespace", ReleaseNamespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(Binary(tb, "helm"), args...).Output()
	if err != nil {
		tb.Fatalf("harness: helm %s: %v", strings.Join(args, " "), err)
	}
	return DecodeYAML(tb, "helm template", out)
}

// RBACObjects returns the ServiceAccounts, roles and bindings among objs; hooks says whether
// those of Helm hooks (the uninstall cleanup) are taken instead of the others.
func RBACObjects(objs []*unstructured.Unstructured, hooks bool) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		_, isHook := o.GetAnnotations()["helm.sh/hook"]
		if slices.Contains(rbacKinds, o.GetKind()) && isHook == hooks {
			out = append(out, o)
		}
	}
	return out
}

// Apply creates or updates the objects with server-side apply, creating their namespaces.
func (c *Cluster) Apply(tb testing.TB, objs ...*unstructured.Unstructured) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				tb.Fatalf("harness: create namespace %s: %v", ns, err)
			}
		}
		o = o.DeepCopy()
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		if err := c.Client.Patch(ctx, o, client.Apply, client.FieldOwner("harness"), client.ForceOwnership); err != nil {
			tb.Fatalf("harness: apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount
// with a token from the TokenRequest API, as a pod of that ServiceAccount would, and
// returns its path.
func (c *Cluster) ServiceAccountKubeconfig(tb testing.TB, namespace, name string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	expiry := int64(6 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("harness: token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    token: %[5]s
contexts:
- name: %[4]s
  context: {cluster: %[1]s, user: %[4]s, namespace: %[6]s}
current-context: %[4]s
`, c.Name, c.Config.Host, b64(c.Config.CAData), namespace+"-"+name, tr.Status.Token, namespace)
	path := filepath.Join(tb.TempDir(), c.Name+"-"+namespace+"-"+name+".kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return path
}

// FailOnForbidden fails the test at its end when the process logged an authorization
// refusal: a permission its RBAC lacks.
func FailOnForbidden(tb testing.TB, p *Process) {
	tb.Cleanup(func() {
		for _, line := range strings.Split(p.Output(), "\n") {
			if strings.Contains(line, "forbidden") {
				tb.Errorf("%s was refused a permission its RBAC should give: %s", p.Name, line)
				return
			}
		}
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// StartGlobalDiscoveryService starts bin/global-discovery-service against the cluster with
// the flags, as the ServiceAccount of gds-client/deploy/global-discovery-service.yaml under
// that manifest's RBAC; a permission refused to it fails the test.
func (c *Cluster) StartGlobalDiscoveryService(tb testing.TB, name string, args ...string) *Process {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	var rbac []*unstructured.Unstructured
	sa := client.ObjectKey{}
	for _, o := range DecodeYAMLFile(tb, filepath.Join(root, "gds-client", "deploy", "global-discovery-service.yaml")) {
		if slices.Contains(rbacKinds, o.GetKind()) {
			rbac = append(rbac, o)
		}
		if o.GetKind() == "ServiceAccount" {
			sa = client.ObjectKeyFromObject(o)
		}
	}
	c.Apply(tb, rbac...)
	p := StartProcess(tb, name, Binary(tb, "global-discovery-service"),
		append([]string{"--kubeconfig=" + c.ServiceAccountKubeconfig(tb, sa.Namespace, sa.Name)}, args...)...)
	FailOnForbidden(tb, p)
	return p
}
