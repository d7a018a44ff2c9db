package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// denySourceCluster installs an admission policy that refuses the imported EndpointSlices
// of one source cluster (as a webhook, a quota or a rule the registry does not check
// would), and waits until the API server enforces it.
func denySourceCluster(t *testing.T, c *harness.Cluster, source string) func() {
	t.Helper()
	ctx := context.Background()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + source},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"discovery.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"endpointslices"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !('%s' in object.metadata.labels) || object.metadata.labels['%s'] != '%s'",
					mcsv1beta1.LabelSourceCluster, mcsv1beta1.LabelSourceCluster, source),
				Message: "the endpoints of cluster " + source + " are not allowed here",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + source},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	mustCreate(t, c, policy, binding)
	probe := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "probe", Labels: map[string]string{mcsv1beta1.LabelSourceCluster: source}},
		AddressType: discoveryv1.AddressTypeIPv4}
	harness.Eventually(t, "the admission policy is enforced", 30*time.Second, func() string {
		if err := c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); err == nil {
			return "a probe slice was accepted"
		}
		return ""
	})
	return func() {
		_ = c.Client.Delete(ctx, binding)
		_ = c.Client.Delete(ctx, policy)
	}
}

// TestAPIServerRefusesOneSourceCluster: when the importing cluster's API server refuses
// the slices of one source cluster, that cluster alone is cost. A first import whose only
// source is refused still gets its ServiceImport, spec.ips and a status that says so
// (Ready=False); a second source's endpoints are imported and its changes flow; the
// EndpointsRefused condition names the cluster, the slice and the API server's message;
// a Warning Event and the per-cluster metric say the same; when the API server accepts
// the cluster again, its endpoints come and the condition clears.
func TestAPIServerRefusesOneSourceCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := memberCluster(t, ctx)
	allow := denySourceCluster(t, c, "bad")
	ctl := c.StartController(t, "mcs-controller/use1-a", controllerArgs(reg, "use1-a")...)
	restCluster(t, reg, "bad")
	restCluster(t, reg, "good")
	put := func(cluster string, ips ...string) {
		t.Helper()
		code, body := restExport(t, reg, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: cluster,
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "relay"}, Spec: relaySpec(80), EndpointGroups: endpoints(ips...)})
		if code != 200 {
			t.Fatalf("export of %s: %d %s", cluster, code, body)
		}
	}
	status := func() (*mcsv1beta1.ServiceImport, string) {
		si := &mcsv1beta1.ServiceImport{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "relay"}, si); err != nil {
			return nil, err.Error()
		}
		var conds []string
		for _, t := range []string{"Ready", "EndpointsRefused"} {
			if cond := meta.FindStatusCondition(si.Status.Conditions, t); cond != nil {
				conds = append(conds, fmt.Sprintf("%s=%s %s", t, cond.Status, cond.Reason))
			}
		}
		return si, strings.Join(conds, " ")
	}

	// The refused cluster is the first and only source.
	put("bad", "10.9.0.1")
	harness.Eventually(t, "a first import with its only source refused", 30*time.Second, func() string {
		si, conds := status()
		if si == nil || conds != "Ready=False Pending EndpointsRefused=True APIServerRefused" || len(si.Spec.IPs) == 0 {
			return conds
		}
		msg := meta.FindStatusCondition(si.Status.Conditions, "EndpointsRefused").Message
		if !strings.Contains(msg, "cluster bad: EndpointSlice dynamo/derived-") || !strings.Contains(msg, "the endpoints of cluster bad are not allowed here") {
			return "message: " + msg
		}
		return ""
	})

	// A second source: imported, and each of its changes flows while bad stays refused.
	for i := 1; i <= 3; i++ {
		ips := []string{"10.1.0.1"}
		for j := 2; j <= i; j++ {
			ips = append(ips, fmt.Sprintf("10.1.0.%d", j))
		}
		put("good", ips...)
		want := fmt.Sprintf("%v ports=[http]", ips)
		harness.Eventually(t, fmt.Sprintf("good's change %d", i), 10*time.Second, func() string {
			if got := sourceState(t, c, "dynamo", "relay", "good"); got != want {
				return got
			}
			return ""
		})
	}
	harness.Eventually(t, "Ready with one source refused", 10*time.Second, func() string {
		if _, conds := status(); conds != "Ready=True Ready EndpointsRefused=True APIServerRefused" {
			return conds
		}
		return ""
	})
	if got := sourceState(t, c, "dynamo", "relay", "bad"); got != "[] ports=[]" {
		t.Fatalf("bad's slices exist: %s", got)
	}
	harness.Eventually(t, "the EndpointsRefused Event", 10*time.Second, func() string {
		var events corev1.EventList
		if err := c.Client.List(ctx, &events, client.InNamespace("dynamo")); err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "ServiceImport" && e.Reason == "EndpointsRefused" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "source cluster bad") {
				return ""
			}
		}
		return fmt.Sprintf("%d events, none matching", len(events.Items))
	})
	if _, body, err := harness.Get("http://" + ctl.MetricsAddr + "/metrics"); err != nil || !strings.Contains(body, `mcs_controller_imports_refused{source_cluster="bad"} 1`) {
		t.Fatalf("metric: %v\n%s", err, grepLines(body, "mcs_controller_imports_refused"))
	}

	// The API server accepts bad again: its endpoints come (on the backed-off retry or the
	// next change) and the condition clears.
	allow()
	put("bad", "10.9.0.1", "10.9.0.2")
	harness.Eventually(t, "bad imported once allowed", 30*time.Second, func() string {
		if got := sourceState(t, c, "dynamo", "relay", "bad"); got != "[10.9.0.1 10.9.0.2] ports=[http]" {
			return got
		}
		if _, conds := status(); conds != "Ready=True Ready EndpointsRefused=False NoneRefused" {
			return conds
		}
		return ""
	})
	if _, body, _ := harness.Get("http://" + ctl.MetricsAddr + "/metrics"); strings.Contains(body, `mcs_controller_imports_refused{source_cluster="bad"}`) {
		t.Fatalf("metric still there:\n%s", grepLines(body, "mcs_controller_imports_refused"))
	}
}
