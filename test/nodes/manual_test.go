package nodes

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestManualOnNodes installs the chart as the manual says, on three clusters with real
// nodes and the project image: the registry's cluster gets one release with the registry
// and a controller (memory store, plaintext), the other two a controller each, dialling the
// registry's gRPC Service on its node. A Service exported from two clusters is then reached
// from a pod of the third through the ServiceImport's IP (the derived Service, kube-proxy),
// and answers from both.
func TestManualOnNodes(t *testing.T) {
	start := time.Now()
	clusters := clusterset(t)
	use1, usw2, euw1 := clusters[0], clusters[1], clusters[2]
	// docs/deploy.md's evaluation path, as written: the registry's release (memory store,
	// plaintext) with its controller added, a controller in each other cluster dialling the
	// registry's load balancer (its node port here), the registry checked and every lease
	// active through the page's port-forwards.
	doc := newDeployDoc(t, "evaluation", clusters, nil)
	doc.Run(t, "Export Services")
	t.Logf("FIGURE chart installed as docs/deploy.md says, every lease active: %s", time.Since(start).Round(time.Second))

	// A Service exported from use1-a (by label) and usw2-a (by ServiceExport), reached
	// from euw1-a's pod through its ServiceImport IP.
	ip := exportAndReach(t, use1, usw2, euw1)
	// A headless Service of a StatefulSet, exported from use1-a: one name per endpoint.
	use1.Apply(t, harness.DecodeYAML(t, "router", []byte(fmt.Sprintf(routerStatefulSet, harness.BusyboxImage)))...)
	// A headless Service of the echo Deployment (pods without hostnames), exported from
	// use1-a: one name per endpoint, by its dashed address.
	use1.Apply(t, harness.DecodeYAML(t, "echo-pods", []byte(echoPods))...)
	// A Service nobody exports: no clusterset name.
	use1.Apply(t, harness.DecodeYAML(t, "private", []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: private\n  namespace: dynamo\nspec:\n  selector: {app: echo}\n  ports:\n  - {port: 80, targetPort: 8080}\n"))...)
	for _, name := range []string{"router", "echo-pods"} {
		harness.Eventually(t, "euw1-a imports dynamo/"+name, 2*time.Minute, func() string {
			si := &mcsv1beta1.ServiceImport{}
			if err := euw1.Client.Get(context.Background(), client.ObjectKey{Namespace: "dynamo", Name: name}, si); err != nil {
				return err.Error()
			}
			return ""
		})
	}

	// clusterset.local (KEP-1645 DNS), from euw1-a's CoreDNS and its multicluster plugin.
	t.Run("ClustersetDNS", func(t *testing.T) {
		nslookup := func(name string) string {
			out, _ := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "nslookup", name)
			return out
		}
		addressOf := func(name, want string) {
			t.Helper()
			harness.Eventually(t, name+" resolves to "+want, 30*time.Second, func() string {
				out := nslookup(name)
				if !regexp.MustCompile(`Name:\s+` + regexp.QuoteMeta(name) + `\s+Address:\s+` + regexp.QuoteMeta(want) + `\b`).MatchString(out) {
					return out
				}
				return ""
			})
		}
		addressOf("echo.dynamo.svc.clusterset.local", ip)
		// A client reaches the import by its clusterset name.
		out, err := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://echo.dynamo.svc.clusterset.local/")
		if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "echo from ") {
			t.Fatalf("http://echo.dynamo.svc.clusterset.local/: %v %q", err, out)
		}
		// Each endpoint of the headless import by <hostname>.<cluster-id>.<service>.
		router := &corev1.Pod{}
		if err := use1.Client.Get(context.Background(), client.ObjectKey{Namespace: "dynamo", Name: "router-0"}, router); err != nil {
			t.Fatal(err)
		}
		addressOf("router-0.use1-a.router.dynamo.svc.clusterset.local", router.Status.PodIP)
		out, err = euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://router-0.use1-a.router.dynamo.svc.clusterset.local:8000/")
		if err != nil || strings.TrimSpace(out) != "router-0" {
			t.Fatalf("http://router-0.use1-a.router.dynamo.svc.clusterset.local:8000/: %v %q, want router-0", err, out)
		}
		addressOf("router.dynamo.svc.clusterset.local", router.Status.PodIP)
		// SRV at the Service's own name and at _<port>._<proto>, as the kubernetes plugin and
		// upstream multicluster answer them: the ClusterSetIP import's port at its name; the
		// headless imports' endpoints by hostname or dashed address, with their ports.
		srvOf := func(name string, want ...string) {
			t.Helper()
			harness.Eventually(t, "SRV "+name, 30*time.Second, func() string {
				out, _ := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "nslookup", "-type=srv", name+".")
				for _, w := range want {
					if !regexp.MustCompile(`service = 0 \d+ ` + w).MatchString(out) {
						return "want " + w + ":\n" + out
					}
				}
				return ""
			})
		}
		echoTarget := `80 echo\.dynamo\.svc\.clusterset\.local`
		srvOf("echo.dynamo.svc.clusterset.local", echoTarget)
		srvOf("_http._tcp.echo.dynamo.svc.clusterset.local", echoTarget)
		routerTarget := `8000 router-0\.use1-a\.router\.dynamo\.svc\.clusterset\.local`
		srvOf("router.dynamo.svc.clusterset.local", routerTarget)
		srvOf("_http._tcp.router.dynamo.svc.clusterset.local", routerTarget)
		var echoPods corev1.PodList
		if err := use1.Client.List(context.Background(), &echoPods, client.InNamespace("dynamo"), client.MatchingLabels{"app": "echo"}); err != nil || len(echoPods.Items) == 0 {
			t.Fatalf("echo pods of use1-a: %v", err)
		}
		var dashed []string
		for _, p := range echoPods.Items {
			name := strings.ReplaceAll(p.Status.PodIP, ".", "-") + ".use1-a.echo-pods.dynamo.svc.clusterset.local"
			addressOf(name, p.Status.PodIP)
			dashed = append(dashed, `8080 `+regexp.QuoteMeta(name))
		}
		srvOf("echo-pods.dynamo.svc.clusterset.local", dashed...)
		srvOf("_http._tcp.echo-pods.dynamo.svc.clusterset.local", dashed...)
		// A port the import does not have: no such name.
		if out, _ := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "nslookup", "-type=srv", "_grpc._tcp.echo.dynamo.svc.clusterset.local."); !strings.Contains(out, "NXDOMAIN") {
			t.Errorf("_grpc._tcp.echo: want NXDOMAIN\n%s", out)
		}
		// Not exported: no clusterset name; and cluster.local names stay local (euw1-a has
		// no Service named echo, only the derived one).
		for _, name := range []string{"private.dynamo.svc.clusterset.local", "echo.dynamo.svc.cluster.local"} {
			if out := nslookup(name); !strings.Contains(out, "NXDOMAIN") {
				t.Errorf("%s in euw1-a: want NXDOMAIN\n%s", name, out)
			}
		}
	})

	// CoreDNS restarted under queries: the new pod takes traffic only once its multicluster
	// data is loaded (the plugin holds the ready plugin), so no query gets NXDOMAIN or
	// SERVFAIL for an imported name.
	t.Run("DNSRestartUnderQueries", func(t *testing.T) {
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "sh", "-c",
				`rm -f /tmp/dns-stop; end=$(($(date +%s)+90)); while [ ! -e /tmp/dns-stop ] && [ $(date +%s) -lt $end ]; do r=$(nslookup echo.dynamo.svc.clusterset.local. 2>&1); case "$r" in *NXDOMAIN*) echo NXDOMAIN;; *SERVFAIL*) echo SERVFAIL;; *"Address: "*) echo ok;; *) echo timeout;; esac; sleep 0.2; done`)
			done <- result{out, err}
		}()
		time.Sleep(3 * time.Second)
		restarted := time.Now()
		if out, err := euw1.Kubectl("-n", "kube-system", "rollout", "restart", "deployment/coredns"); err != nil {
			t.Fatalf("rollout restart: %v %s", err, out)
		}
		if out, err := euw1.Kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=90s"); err != nil {
			t.Fatalf("rollout status: %v %s", err, out)
		}
		t.Logf("FIGURE CoreDNS rolled out in %s", time.Since(restarted).Round(100*time.Millisecond))
		// The queries go on until the old pod is gone, and 5 s after: the whole restart,
		// kube-proxy's rules for the old pod's endpoint removed included.
		harness.Eventually(t, "euw1-a's old CoreDNS pod gone", 90*time.Second, func() string {
			var pods corev1.PodList
			if err := euw1.Client.List(context.Background(), &pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-dns"}); err != nil {
				return err.Error()
			}
			for _, p := range pods.Items {
				if !p.CreationTimestamp.After(restarted.Add(-time.Second)) || p.DeletionTimestamp != nil {
					return "still there: " + p.Name
				}
			}
			return ""
		})
		time.Sleep(5 * time.Second)
		if out, err := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "sh", "-c", ": > /tmp/dns-stop"); err != nil {
			t.Fatalf("stop the queries: %v %s", err, out)
		}
		r := <-done
		t.Logf("FIGURE the queries ran %s, until 5 s after the old CoreDNS pod was gone", time.Since(restarted.Add(-3*time.Second)).Round(100*time.Millisecond))
		counts := map[string]int{}
		for _, l := range strings.Fields(r.out) {
			counts[l]++
		}
		t.Logf("FIGURE queries during the CoreDNS restart: %d answered, %d timed out, %d NXDOMAIN, %d SERVFAIL", counts["ok"], counts["timeout"], counts["NXDOMAIN"], counts["SERVFAIL"])
		if r.err != nil || counts["ok"] == 0 || counts["NXDOMAIN"] > 0 || counts["SERVFAIL"] > 0 {
			t.Errorf("queries during the restart: %v\n%s", r.err, r.out)
		}
	})

	// The manual's kubectl checks.
	t.Run("ManualChecks", func(t *testing.T) {
		out, err := usw2.Kubectl("-n", "dynamo", "get", "serviceexport", "echo", "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}`)
		if err != nil || !strings.Contains(out, "Valid=True Valid") || !strings.Contains(out, "Ready=True Ready") || !strings.Contains(out, "Conflict=False NoConflicts") {
			t.Errorf("usw2-a's ServiceExport conditions: %v\n%s", err, out)
		}
		out, err = euw1.Kubectl("-n", "dynamo", "get", "serviceimports")
		if err != nil || !regexp.MustCompile(`(?m)^echo\s+ClusterSetIP\s`).MatchString(out) || !regexp.MustCompile(`(?m)^router\s+Headless\s`).MatchString(out) {
			t.Errorf("kubectl get serviceimports in euw1-a: %v\n%s", err, out)
		}
		out, err = euw1.Kubectl("-n", "dynamo", "get", "services,endpointslices", "-l", "multicluster.kubernetes.io/service-name",
			"-L", "multicluster.kubernetes.io/service-name,multicluster.kubernetes.io/source-cluster")
		for _, want := range []string{"service/derived-", "use1-a", "usw2-a", "echo"} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("kubectl get services,endpointslices in euw1-a: no %q: %v\n%s", want, err, out)
			}
		}
		pf := use1.PortForward(t, "mcs-system", "deployment/mcs-registry", 9091)
		if body, err := harness.HTTPGet("http://127.0.0.1:" + pf + "/readyz"); err != nil || body != "ok" {
			t.Errorf("/readyz through port-forward deployment/mcs-registry 9091: %q %v", body, err)
		}
	})

	// The rest of docs/deploy.md's evaluation path before its uninstall: the page's exports
	// and their checks, the Global Discovery Service from its example manifest listing the
	// pool and the Global Router with their real pods, what the registry holds, the upgrade
	// and the rollback.
	t.Run("DeployDoc", func(t *testing.T) {
		doc.workloads(t)
		doc.Run(t, "Uninstall")
	})

	// A port the registry excludes is what kube-proxy does: usw2-a exports "clash" with its
	// http port on another number than use1-a's older export, so the registry excludes
	// usw2-a's http (PortConflict) and no traffic to the import's http port reaches usw2-a's
	// pods, though both clusters' endpoints are imported.
	t.Run("ExcludedPort", func(t *testing.T) {
		ctx := context.Background()
		clash := func(c *harness.Cluster, port int) {
			y := fmt.Sprintf(echoWorkload, c.Name, harness.BusyboxImage, `dynamo.nvidia.com/mcs-export: "true"`)
			y = strings.NewReplacer("name: echo", "name: clash", "app: echo", "app: clash", "'echo from ", "'clash from ",
				"port: 80,", fmt.Sprintf("port: %d,", port)).Replace(y)
			c.Apply(t, harness.DecodeYAML(t, "clash", []byte(y))...)
		}
		importFrom := func(want int) string {
			var ip string
			harness.Eventually(t, fmt.Sprintf("euw1-a imports dynamo/clash from %d cluster(s)", want), 2*time.Minute, func() string {
				si := &mcsv1beta1.ServiceImport{}
				if err := euw1.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "clash"}, si); err != nil {
					return err.Error()
				}
				if len(si.Spec.IPs) == 0 || len(si.Status.Clusters) != want || readyEndpoints(t, euw1, "clash", si.Status.Clusters[want-1].Cluster) != 2 {
					return fmt.Sprintf("ips %v, clusters %v", si.Spec.IPs, si.Status.Clusters)
				}
				ip = si.Spec.IPs[0]
				return ""
			})
			return ip
		}
		clash(use1, 80)
		importFrom(1)
		clash(usw2, 81)
		ip := importFrom(2)
		harness.Eventually(t, "usw2-a's export reports the excluded port", time.Minute, func() string {
			out, _ := usw2.Kubectl("-n", "dynamo", "get", "serviceexport", "clash", "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
			if !strings.Contains(out, "Conflict=True PortConflict") || !strings.Contains(out, "http/TCP/81") {
				return out
			}
			return ""
		})
		answers := map[string]int{}
		for range 30 {
			out, err := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://"+ip+":80/")
			if err != nil {
				t.Fatalf("request to %s:80: %v: %s", ip, err, out)
			}
			answers[strings.TrimSpace(out)]++
		}
		if answers["clash from use1-a"] != 30 {
			t.Fatalf("30 requests to the import's http port were answered %v; want every one by use1-a (usw2-a's http port is excluded)", answers)
		}
		t.Logf("FIGURE a port excluded for usw2-a: 30 of 30 requests to it answered by use1-a's pods")
	})

	// Faults, with pods: each prints how long it took.
	t.Run("Faults", func(t *testing.T) {
		ctx := context.Background()
		// A source scaled to zero: its endpoints leave the import in every other cluster.
		scaled := time.Now()
		kubectlOK(t, usw2, "-n", "dynamo", "scale", "deployment/echo", "--replicas=0")
		harness.Eventually(t, "usw2-a's echo endpoints gone from euw1-a", time.Minute, func() string {
			if n := readyEndpoints(t, euw1, "echo", "usw2-a"); n != 0 {
				return fmt.Sprintf("%d ready endpoints from usw2-a", n)
			}
			return ""
		})
		t.Logf("FIGURE a source Deployment scaled to zero → its endpoints gone from the other cluster: %s", time.Since(scaled).Round(10*time.Millisecond))

		// The controller leader's pod deleted: the other replica takes over.
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: "mcs-system", Name: "mcs-controller.multicluster.dynamo.nvidia.com"}
		if err := euw1.Client.Get(ctx, key, lease); err != nil || lease.Spec.HolderIdentity == nil {
			t.Fatalf("euw1-a's controller Lease: %v", err)
		}
		leader, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		deleted := time.Now()
		kubectlOK(t, euw1, "-n", "mcs-system", "delete", "pod", leader, "--wait=false")
		harness.Eventually(t, "another controller replica leads euw1-a", 2*time.Minute, func() string {
			if err := euw1.Client.Get(ctx, key, lease); err != nil {
				return err.Error()
			}
			if h := lease.Spec.HolderIdentity; h == nil || strings.HasPrefix(*h, leader+"_") {
				return "still " + leader
			}
			return ""
		})
		t.Logf("FIGURE the controller leader's pod deleted → another replica leads: %s", time.Since(deleted).Round(10*time.Millisecond))
		kubectlOK(t, usw2, "-n", "dynamo", "scale", "deployment/echo", "--replicas=1")
		harness.Eventually(t, "usw2-a's endpoints back in euw1-a under the new leader", time.Minute, func() string {
			if n := readyEndpoints(t, euw1, "echo", "usw2-a"); n != 1 {
				return fmt.Sprintf("%d ready endpoints from usw2-a", n)
			}
			return ""
		})

		// The registry's pod deleted (memory store): a new one starts empty, every cluster
		// registers again and sends its exports; the imported endpoints are held meanwhile.
		monitor := euw1.MonitorImportedEndpoints(t, "dynamo", "echo", "use1-a", "usw2-a")
		var regPods corev1.PodList
		if err := use1.Client.List(ctx, &regPods, client.InNamespace("mcs-system"), client.MatchingLabels{"app.kubernetes.io/name": "mcs-registry"}); err != nil || len(regPods.Items) != 1 {
			t.Fatalf("the registry pod: %v (%d)", err, len(regPods.Items))
		}
		restarted := time.Now()
		kubectlOK(t, use1, "-n", "mcs-system", "delete", "pod", regPods.Items[0].Name)
		use1.WaitDeploymentAvailable(t, "mcs-system", "mcs-registry")
		pf := use1.PortForward(t, "mcs-system", "deployment/mcs-registry", 8080)
		harness.Eventually(t, "use1-a and usw2-a exports in the new registry (each cluster sends all of its exports at once)", 2*time.Minute, func() string {
			body, err := harness.HTTPGet("http://127.0.0.1:" + pf + "/v1/clustersets/prod/imports")
			if err != nil {
				return err.Error()
			}
			if !strings.Contains(body, `"use1-a"`) || !strings.Contains(body, `"usw2-a"`) {
				return body
			}
			return ""
		})
		t.Logf("FIGURE the registry's pod deleted (memory store) → the import whole again in the new registry: %s", time.Since(restarted).Round(100*time.Millisecond))
		monitor.Stop()
		if err := monitor.Err(); err != nil {
			t.Fatal(err)
		}
		for src, d := range monitor.Outage() {
			t.Logf("FIGURE time without imported endpoints from %s in euw1-a while the registry restarted: %s", src, d.Round(time.Millisecond))
			if d > 0 {
				t.Errorf("euw1-a had no endpoints from %s for %s: the controller must hold them until the cluster is back", src, d)
			}
		}
	})

	// Each node has its own pod-log folder: a pod's log is still there minutes after it
	// started (kubelets sharing /var/log/pods deleted each other's pods' logs). Checked
	// last, on the pod use1-a's node has run since the shared clusterset started, so the
	// time of the tests before counts towards the two minutes.
	t.Run("PodLogsStay", func(t *testing.T) {
		pod := &corev1.Pod{}
		if err := use1.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "log-witness"}, pod); err != nil {
			t.Fatal(err)
		}
		age := time.Since(pod.CreationTimestamp.Time)
		if age < 2*time.Minute {
			time.Sleep(2*time.Minute - age)
		}
		out, err := use1.Kubectl("-n", "kube-system", "logs", "log-witness")
		if err != nil || !strings.Contains(out, "log witness started") {
			t.Errorf("kubectl logs of a pod %s after it was created: %v\n%.2000s", time.Since(pod.CreationTimestamp.Time).Round(time.Second), err, out)
		}
		t.Logf("FIGURE a pod's log read %s after the pod was created (waited %s for it)", time.Since(pod.CreationTimestamp.Time).Round(time.Second), max(2*time.Minute-age, 0).Round(time.Second))
	})

	// The page's uninstall: each member's release, its cluster removed from the registry,
	// and the cleanup by hand in the registry's cluster.
	doc.Run(t, "")
}

// exportAndReach exports the echo Service of two real pods from use1-a (by label) and
// usw2-a (by ServiceExport), waits until euw1-a imports it from both with a clusterset IP,
// and reaches it from a pod of euw1-a through that IP until both clusters answered. It
// returns the IP; the namespace dynamo and the client pod stay.
func exportAndReach(t *testing.T, use1, usw2, euw1 *harness.Cluster) string {
	t.Helper()
	for _, c := range []*harness.Cluster{use1, usw2, euw1} {
		c.Apply(t, harness.DecodeYAML(t, "ns", []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dynamo\n"))...)
	}
	for i, c := range []*harness.Cluster{use1, usw2} {
		svcLabels := "" // exported by a ServiceExport
		if i == 0 {
			svcLabels = `dynamo.nvidia.com/mcs-export: "true"` // exported by the label
		}
		c.Apply(t, harness.DecodeYAML(t, "echo", []byte(fmt.Sprintf(echoWorkload, c.Name, harness.BusyboxImage, svcLabels)))...)
		if i == 1 {
			c.Apply(t, harness.DecodeYAML(t, "export", []byte("apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata:\n  name: echo\n  namespace: dynamo\n"))...)
		}
	}
	exported := time.Now()
	var ip string
	harness.Eventually(t, "euw1-a imports dynamo/echo from both clusters with a clusterset IP", 2*time.Minute, func() string {
		si := &mcsv1beta1.ServiceImport{}
		if err := euw1.Client.Get(context.Background(), client.ObjectKey{Namespace: "dynamo", Name: "echo"}, si); err != nil {
			return err.Error()
		}
		if len(si.Spec.IPs) == 0 || len(si.Status.Clusters) != 2 {
			return fmt.Sprintf("ips %v, clusters %v", si.Spec.IPs, si.Status.Clusters)
		}
		ip = si.Spec.IPs[0]
		return ""
	})
	t.Logf("FIGURE export in two clusters → imported in the third with its clusterset IP: %s", time.Since(exported).Round(100*time.Millisecond))

	euw1.Apply(t, harness.DecodeYAML(t, "client", []byte(fmt.Sprintf(busyboxPod, "client", "dynamo", harness.BusyboxImage, "sleep 100000")))...)
	harness.Eventually(t, "client pod Running in euw1-a", 2*time.Minute, func() string {
		p := &corev1.Pod{}
		if err := euw1.Client.Get(context.Background(), client.ObjectKey{Namespace: "dynamo", Name: "client"}, p); err != nil {
			return err.Error()
		}
		if p.Status.Phase != corev1.PodRunning {
			return string(p.Status.Phase)
		}
		return ""
	})
	// Through the ServiceImport's IP, the answers come from both source clusters' pods.
	seen := map[string]bool{}
	harness.Eventually(t, "answers from both clusters through "+ip, time.Minute, func() string {
		out, err := euw1.Kubectl("exec", "-n", "dynamo", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://"+ip+":80/")
		if err != nil {
			return fmt.Sprintf("%v: %s", err, out)
		}
		seen[strings.TrimSpace(out)] = true
		if !seen["echo from use1-a"] || !seen["echo from usw2-a"] {
			return fmt.Sprintf("seen %v", seen)
		}
		return ""
	})

	return ip
}

// readyEndpoints counts the ready endpoints of the import service that came from source.
func readyEndpoints(t *testing.T, c *harness.Cluster, service, source string) int {
	t.Helper()
	var slices discoveryv1.EndpointSliceList
	if err := c.Client.List(context.Background(), &slices, client.InNamespace("dynamo"),
		client.MatchingLabels{"multicluster.kubernetes.io/service-name": service, "multicluster.kubernetes.io/source-cluster": source}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// echoWorkload is a Deployment of two busybox httpd pods answering "echo from <cluster>",
// with its Service and its labels (%[3]s).
const echoWorkload = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: dynamo
spec:
  replicas: 2
  selector:
    matchLabels: {app: echo}
  template:
    metadata:
      labels: {app: echo}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: %[2]s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "mkdir -p /tmp/www && echo 'echo from %[1]s' > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]
        ports:
        - {name: http, containerPort: 8080}
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  namespace: dynamo
  labels: {%[3]s}
spec:
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: http}
`

// echoPods is a headless Service of the echo Deployment, exported.
const echoPods = `apiVersion: v1
kind: Service
metadata:
  name: echo-pods
  namespace: dynamo
spec:
  clusterIP: None
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: echo-pods
  namespace: dynamo
`

// routerStatefulSet is a headless Service of one StatefulSet pod (router-0), exported.
const routerStatefulSet = `apiVersion: v1
kind: Service
metadata:
  name: router
  namespace: dynamo
spec:
  clusterIP: None
  selector: {app: router}
  ports:
  - {name: http, port: 8000, targetPort: 8000}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: router
  namespace: dynamo
spec:
  serviceName: router
  replicas: 1
  selector:
    matchLabels: {app: router}
  template:
    metadata:
      labels: {app: router}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: %s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www"]
        ports:
        - {name: http, containerPort: 8000}
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: router
  namespace: dynamo
`

// globalRouter is the headless Global Router Service of two pods, exported by its label,
// which the Global Discovery Service lists.
const globalRouter = `apiVersion: v1
kind: Namespace
metadata:
  name: global-discovery
---
apiVersion: v1
kind: Service
metadata:
  name: global-router
  namespace: global-discovery
  labels: {dynamo.nvidia.com/mcs-export: "true"}
spec:
  clusterIP: None
  selector: {app: global-router}
  ports:
  - {name: http, port: 8000, targetPort: http}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: global-router
  namespace: global-discovery
spec:
  replicas: 2
  selector:
    matchLabels: {app: global-router}
  template:
    metadata:
      labels: {app: global-router}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: %s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www"]
        ports:
        - {name: http, containerPort: 8000}
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
`
