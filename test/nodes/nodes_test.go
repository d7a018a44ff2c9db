// Package nodes tests the local clusters' real nodes: the project image in a Pod, Services
// through kube-proxy, pod addresses routed between clusters, cluster DNS and
// `kubectl port-forward`.
package nodes

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

const ns = "nodes-test"

// TestRealNodes proves, on two clusters with one real node each (the package's shared
// clusterset), on real pods and with the project's real image, what a user's deployment
// stands on.
func TestRealNodes(t *testing.T) {
	start := time.Now()
	clusters := clusterset(t)
	a, b := clusters[0], clusters[1]

	for _, c := range clusters {
		c.Apply(t, harness.DecodeYAML(t, "namespace", []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"))...)
	}
	a.Apply(t, harness.DecodeYAML(t, "registry", []byte(fmt.Sprintf(registryManifest, ns, harness.ProjectImage)))...)
	for _, c := range clusters {
		c.Apply(t, harness.DecodeYAML(t, "client", []byte(fmt.Sprintf(busyboxPod, "client", ns, harness.BusyboxImage, "sleep 100000")))...)
	}
	a.Apply(t, harness.DecodeYAML(t, "echo", []byte(fmt.Sprintf(busyboxPod, "echo", ns,
		harness.BusyboxImage, "mkdir -p /tmp/www && echo \\\"echo from $(hostname)\\\" > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www")))...)

	registryPod := waitReady(t, a, map[string]string{"app": "mcs-registry"})
	waitReady(t, a, map[string]string{"app": "client"})
	waitReady(t, b, map[string]string{"app": "client"})
	echo := waitReady(t, a, map[string]string{"app": "echo"})
	t.Logf("FIGURE pods Ready (registry from the project image, clients, echo server): %s", time.Since(start).Round(time.Second))

	t.Run("ServiceClusterIP", func(t *testing.T) {
		svc := &corev1.Service{}
		if err := a.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mcs-registry"}, svc); err != nil {
			t.Fatal(err)
		}
		out := execIn(t, a, "client", "timeout", "5", "wget", "-q", "-O", "-", "http://"+svc.Spec.ClusterIP+":9091/readyz")
		if strings.TrimSpace(out) != "ok" {
			t.Fatalf("/readyz through the Service's ClusterIP %s: %q, want ok", svc.Spec.ClusterIP, out)
		}
		// The same by the Service's DNS name, through CoreDNS and kube-proxy.
		out = execIn(t, a, "client", "timeout", "5", "wget", "-q", "-O", "-", "http://mcs-registry."+ns+".svc.cluster.local:9091/readyz")
		if strings.TrimSpace(out) != "ok" {
			t.Fatalf("/readyz through mcs-registry.%s.svc.cluster.local: %q, want ok", ns, out)
		}
	})

	t.Run("PodToPodAcrossClusters", func(t *testing.T) {
		if !strings.HasPrefix(echo.Status.PodIP, strings.TrimSuffix(a.PodCIDR, "0.0/16")) {
			t.Fatalf("echo pod IP %s is not in cluster A's pod range %s", echo.Status.PodIP, a.PodCIDR)
		}
		out := execIn(t, b, "client", "timeout", "5", "wget", "-q", "-O", "-", "http://"+echo.Status.PodIP+":8080/")
		if want := "echo from echo"; strings.TrimSpace(out) != want {
			t.Fatalf("cluster B's pod to cluster A's pod %s: %q, want %q", echo.Status.PodIP, out, want)
		}
	})

	t.Run("ClusterDNS", func(t *testing.T) {
		out := execIn(t, a, "client", "nslookup", "kubernetes.default.svc.cluster.local")
		want := strings.TrimSuffix(a.ServiceCIDR, "0.0/16") + "0.1"
		if !regexp.MustCompile(`Address:\s+` + regexp.QuoteMeta(want) + `\b`).MatchString(out) {
			t.Fatalf("nslookup kubernetes.default.svc.cluster.local in %s: want %s\n%s", a.Name, want, out)
		}
		// Cluster B's DNS answers for its own cluster, not A's Services.
		out, _ = b.Kubectl("exec", "-n", ns, "client", "--", "nslookup", "mcs-registry."+ns+".svc.cluster.local")
		if regexp.MustCompile(`Name:\s+mcs-registry`).MatchString(out) || !strings.Contains(out, "NXDOMAIN") {
			t.Fatalf("cluster B's DNS on cluster A's Service: want NXDOMAIN\n%s", out)
		}
	})

	t.Run("PortForward", func(t *testing.T) {
		port := a.PortForward(t, ns, "pod/"+registryPod.Name, 9091)
		body, err := harness.HTTPGet("http://127.0.0.1:" + port + "/readyz")
		if err != nil || body != "ok" {
			t.Fatalf("/readyz through kubectl port-forward: %q, %v", body, err)
		}
	})
}

// waitReady waits for the one Pod with labels to be Ready and returns it.
func waitReady(t *testing.T, c *harness.Cluster, labels map[string]string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	harness.Eventually(t, fmt.Sprintf("pod %v Ready in %s", labels, c.Name), 2*time.Minute, func() string {
		var pods corev1.PodList
		if err := c.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err.Error()
		}
		if len(pods.Items) != 1 {
			return fmt.Sprintf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				pod = &p
				return ""
			}
		}
		var states []string
		for _, s := range p.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s %+v", s.Name, s.State))
		}
		return fmt.Sprintf("phase %s, containers %v, conditions %v", p.Status.Phase, states, p.Status.Conditions)
	})
	return pod
}

// execIn runs a command in the container of pod in the test namespace (kubectl exec,
// through the apiserver and the node's kubelet) and returns its output.
func execIn(t *testing.T, c *harness.Cluster, pod string, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(append([]string{"exec", "-n", ns, pod, "--"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl exec %s %v in %s: %v\n%s", pod, args, c.Name, err, out)
	}
	return out
}

// registryManifest runs the project image as the chart does: /mcs-registry with the memory
// store, Ready when /readyz answers, behind a ClusterIP Service.
const registryManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: mcs-registry
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: mcs-registry}
  template:
    metadata:
      labels: {app: mcs-registry}
    spec:
      containers:
      - name: registry
        image: %[2]s
        imagePullPolicy: Never
        args: ["--store=memory"]
        ports:
        - {name: grpc, containerPort: 9090}
        - {name: http, containerPort: 8080}
        - {name: admin, containerPort: 9091}
        readinessProbe:
          httpGet: {path: /readyz, port: admin}
          periodSeconds: 2
---
apiVersion: v1
kind: Service
metadata:
  name: mcs-registry
  namespace: %[1]s
spec:
  selector: {app: mcs-registry}
  ports:
  - {name: admin, port: 9091, targetPort: admin}
`

// busyboxPod is a Pod of the busybox image running one shell command.
const busyboxPod = `apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[1]s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[3]s
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "%[4]s"]
`
