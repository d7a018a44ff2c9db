package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
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
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("harness"), client.ForceOwnership); err != nil {
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

// refusalRE matches the API server's "forbidden" message as logs quote it (quotes may be
// escaped): the user, verb, resource[/subresource], group and namespace.
var refusalRE = regexp.MustCompile(`User \\?"([^"\\]+)\\?" cannot ([a-z]+) resource \\?"([^"\\]+)\\?" in API group \\?"([^"\\]*)\\?"(?: in the namespace \\?"([^"\\]+)\\?")?`)

// admissionRE matches a refusal by admission: a ValidatingAdmissionPolicy or a webhook.
var admissionRE = regexp.MustCompile(`ValidatingAdmissionPolicy '[^']*' with binding '[^']*' denied request|admission webhook \\?"[^"\\]*\\?" denied the request`)

// FailOnForbidden fails the test when the process logged an authorization refusal its
// RBAC should not have given. Each refusal is asked again of the API server (a
// SubjectAccessReview, retried for a few seconds) while the test runs, so one the API
// server gave while its RBAC caches were still loading after a restart does not count, and
// one the RBAC really lacks does.
func FailOnForbidden(tb testing.TB, p *Process, c *Cluster) {
	var (
		mu      sync.Mutex
		checked int // lines of the output already looked at
		refused string
	)
	scan := func(final bool) {
		mu.Lock()
		defer mu.Unlock()
		lines := strings.Split(p.Output(), "\n")
		if !final && len(lines) > 0 {
			lines = lines[:len(lines)-1] // the last line may be incomplete
		}
		gone := false // the API server did not answer: ask once per line, not for ten seconds
		for ; checked < len(lines) && refused == ""; checked++ {
			line := lines[checked]
			// Admission (a policy or webhook denying the object) also answers "forbidden";
			// it is no authorization refusal.
			if !strings.Contains(line, "forbidden") || admissionRE.MatchString(line) {
				continue
			}
			m := refusalRE.FindStringSubmatch(line)
			if m == nil {
				refused = line
				break
			}
			var v verdict
			if gone {
				v = c.allowed(m[1], m[2], m[3], m[4], m[5])
			} else {
				v = c.allowedSoon(m[1], m[2], m[3], m[4], m[5])
			}
			switch v {
			case denied:
				refused = line
			case unknown:
				gone = true
				tb.Logf("harness: could not check a refusal (the API server is gone): %s", line)
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				scan(false)
			}
		}
	}()
	tb.Cleanup(func() {
		close(stop)
		<-done
		scan(true)
		if refused != "" {
			tb.Errorf("%s was refused a permission its RBAC should give: %s", p.Name, refused)
		}
	})
}

type verdict int

const (
	allowed verdict = iota
	denied
	unknown
)

// allowedSoon asks the API server whether the ServiceAccount user may do it, for up to ten
// seconds until it says yes.
func (c *Cluster) allowedSoon(user, verb, resource, group, namespace string) verdict {
	v := unknown
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if v = c.allowed(user, verb, resource, group, namespace); v == allowed {
			return v
		}
	}
	return v
}

// allowed asks the API server whether the ServiceAccount user may do it now.
func (c *Cluster) allowed(user, verb, resource, group, namespace string) verdict {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups := []string{"system:authenticated", "system:serviceaccounts"}
	if parts := strings.Split(user, ":"); len(parts) == 4 && parts[0] == "system" && parts[1] == "serviceaccount" {
		groups = append(groups, "system:serviceaccounts:"+parts[2])
	}
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub},
	}}
	if err := c.Client.Create(ctx, sar); err != nil {
		return unknown
	}
	if sar.Status.Allowed {
		return allowed
	}
	return denied
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
	FailOnForbidden(tb, p, c)
	return p
}
