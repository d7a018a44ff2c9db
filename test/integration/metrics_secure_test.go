package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestSecureMetrics: with --metrics-secure (chart value controller.metrics.secure) the
// controller serves /metrics over HTTPS to tokens the API server says may get /metrics: the
// chart's metrics-reader ClusterRole lets a scraper in, another token gets 403, none 401.
// The chart's controller RBAC carries the TokenReview and SubjectAccessReview rights.
func TestSecureMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	ctl := cl.StartController(t, "mcs-controller", controllerArgs(reg, "use1-a", "--metrics-secure")...)
	// The chart's reader role, rendered with the same values, bound to a scraper.
	cl.Apply(t, harness.RBACObjects(harness.RenderChart(t, "registry.enabled=false", "controller.enabled=true",
		"controller.registryUrls={https://mcs-registry.example:9090}", "controller.metrics.secure=true"), false)...)
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		if _, err := cs.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, stranger := token("prometheus"), token("stranger")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-mcs-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: harness.ReleaseNamespace + "-mcs-controller-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+ctl.MetricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	harness.Eventually(t, "the scraper reads /metrics over HTTPS", 30*time.Second, func() string {
		if code, body := scrape(scraper); code != 200 || !strings.Contains(body, "mcs_controller_build_info") {
			return fmt.Sprintf("%d %.300s", code, body)
		}
		return ""
	})
	for _, tc := range []struct {
		name, token string
		code        int
	}{{"another ServiceAccount", stranger, 403}, {"no token", "", 401}} {
		if code, body := scrape(tc.token); code != tc.code {
			t.Errorf("%s: %d %.200s; want %d", tc.name, code, body, tc.code)
		}
	}
	if resp, err := http.Get("http://" + ctl.MetricsAddr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if code, _ := get(t, "http://"+ctl.MetricsAddr+"/metrics"); code == 200 {
			t.Error("the secure metrics port answered plain HTTP")
		}
	}
}
