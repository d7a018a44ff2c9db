package nodes

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestLocalityOnNodes: traffic stays close, as docs/deploy.md ("Locality") says. The chart
// is installed as the evaluation path says; usw2-a's controller registers it in us-east-1
// (controller.region), so use1-a has a second cluster in its region. A Service of real pods
// answering their cluster's id is exported from the three clusters with the policy
// cluster,region, and a pod in use1-a sends it a request every 100 ms through the clusterset
// IP. While use1-a's pods are ready they answer every request; scaled to zero, usw2-a's
// answer, then euw1-a's once usw2-a's are gone too, then use1-a's again when they are back,
// with no failed request; the headless name answers the same tier. Each move is timed against
// the readiness flip of the cluster's own EndpointSlice in the same run. With the policy any,
// requests spread over the three clusters again.
func TestLocalityOnNodes(t *testing.T) {
	clusters := clusterset(t)
	use1, usw2 := clusters[0], clusters[1]
	doc := newDeployDoc(t, "evaluation", clusters, map[string]string{"usw2-a": "us-east-1"})
	doc.Run(t, "Export Services")
	for _, c := range clusters {
		c.Apply(t, harness.DecodeYAML(t, "ns", []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dynamo\n"))...)
		c.Apply(t, harness.DecodeYAML(t, "echo", []byte(fmt.Sprintf(localityWorkload, c.Name, harness.BusyboxImage)))...)
	}
	ctx := context.Background()
	var ip string
	harness.Eventually(t, "use1-a imports dynamo/echo from three clusters, its own tier active", 3*time.Minute, func() string {
		si := &mcsv1beta1.ServiceImport{}
		if err := use1.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "echo"}, si); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(si.Status.Conditions, "Locality")
		if len(si.Spec.IPs) == 0 || len(si.Status.Clusters) != 3 || c == nil || c.Reason != "Cluster" || c.Status != "True" {
			return fmt.Sprintf("ips %v, clusters %v, locality %+v", si.Spec.IPs, si.Status.Clusters, c)
		}
		ip = si.Spec.IPs[0]
		return ""
	})
	sent := uptime(t)
	tc := startAnswers(t, use1, ip)
	pods := func(c *harness.Cluster) string { return strings.TrimSuffix(c.PodCIDR, "0.0/16") }
	headless := func(want *harness.Cluster, n int) {
		t.Helper()
		harness.Eventually(t, "the headless name answers "+want.Name+"'s pods", time.Minute, func() string {
			addrs := lookup(t, use1, "echo-headless.dynamo.svc.clusterset.local")
			if len(addrs) != n {
				return fmt.Sprintf("%v", addrs)
			}
			for _, a := range addrs {
				if !strings.HasPrefix(a, pods(want)) {
					return fmt.Sprintf("%v", addrs)
				}
			}
			return ""
		})
	}

	// Steady: every request stays in use1-a. The condition says the controller wrote the
	// hinted slices; kube-proxy programs them a moment later (a cold run saw 3 of the
	// first 100 requests leave): the steady state begins once 30 in a row stayed.
	settled := tc.waitSettled(t, sent, "use1-a")
	t.Logf("FIGURE the Locality condition True → the first of 30 answers in a row from use1-a (the client pod's start included): %.1f s", settled)
	t0 := uptime(t)
	answers := tc.waitAnswers(t, t0, 100)
	own, total, failed := tally(answers, t0, "use1-a")
	if failed > 0 || float64(own) < 0.99*float64(total) {
		t.Fatalf("%d of %d requests answered by use1-a's own pods, %d failed; want at least 99 %%", own, total, failed)
	}
	t.Logf("FIGURE share of requests answered by the active tier (use1-a, its pods ready): %d of %d (%.1f %%)", own, total, 100*float64(own)/float64(total))
	headless(use1, 2)

	// use1-a's pods scaled to zero (graceful: they serve through a 10 s preStop while not
	// ready): the region takes over, with no failed request.
	moveTo := func(what string, scaled *harness.Cluster, replicas int, to string) {
		t.Helper()
		begin := uptime(t)
		floor := make(chan float64, 1)
		go func() { floor <- readinessFlip(scaled, replicas, begin) }()
		if out, err := scaled.Kubectl("-n", "dynamo", "scale", "deployment/echo", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
			t.Fatalf("scale %s: %v: %s", scaled.Name, err, out)
		}
		settled := tc.waitSettled(t, begin, to)
		_, _, failed := tally(tc.read(t), begin, to)
		if failed > 0 {
			t.Fatalf("%s: %d requests failed", what, failed)
		}
		f := <-floor
		t.Logf("FIGURE %s: only %s answers %.1f s after the scale, 0 failed requests; the readiness flip of %s's own EndpointSlice took %.1f s (%.1f×)",
			what, to, settled, scaled.Name, f, settled/max(f, 0.1))
	}
	moveTo("use1-a's pods scaled to zero", use1, 0, "usw2-a")
	headless(usw2, 2)
	moveTo("usw2-a's pods scaled to zero too", usw2, 0, "euw1-a")
	moveTo("use1-a's pods back", use1, 2, "use1-a")
	headless(use1, 2)

	// The policy any: the requests spread over the three clusters again.
	if out, err := usw2.Kubectl("-n", "dynamo", "scale", "deployment/echo", "--replicas=2"); err != nil {
		t.Fatalf("scale usw2-a: %v: %s", err, out)
	}
	for _, c := range clusters {
		for _, name := range []string{"echo", "echo-headless"} {
			if out, err := c.Kubectl("-n", "dynamo", "annotate", "--overwrite", "serviceexport", name, "multicluster.dynamo.nvidia.com/locality=any"); err != nil {
				t.Fatalf("annotate %s: %v: %s", c.Name, err, out)
			}
		}
	}
	begin := uptime(t)
	harness.Eventually(t, "requests answered by every cluster with the policy any", 2*time.Minute, func() string {
		seen := map[string]int{}
		for _, a := range tc.read(t) {
			if a.at > begin {
				seen[a.from]++
			}
		}
		if seen["use1-a"] == 0 || seen["usw2-a"] == 0 || seen["euw1-a"] == 0 {
			return fmt.Sprintf("%v", seen)
		}
		return ""
	})
	spread := map[string]int{}
	for _, a := range tc.waitAnswers(t, uptime(t), 60) {
		spread[a.from]++
	}
	t.Logf("FIGURE with the policy any, the next requests spread: %v", spread)
}

// localityWorkload is the echo Deployment of one cluster (%[1]s: its id, which each pod
// answers), whose pods serve 10 s past the start of their termination (a preStop delay, as a
// Service behind any load balancer needs), its Service and a headless one, both exported with
// the policy cluster,region.
const localityWorkload = `apiVersion: apps/v1
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
      terminationGracePeriodSeconds: 15
      containers:
      - name: http
        image: %[2]s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "mkdir -p /tmp/www && echo '%[1]s' > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]
        ports:
        - {name: http, containerPort: 8080}
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
        lifecycle:
          preStop:
            exec: {command: ["sleep", "10"]}
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  namespace: dynamo
spec:
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: v1
kind: Service
metadata:
  name: echo-headless
  namespace: dynamo
spec:
  clusterIP: None
  selector: {app: echo}
  ports:
  - {name: http, port: 8080, targetPort: http}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: echo
  namespace: dynamo
  annotations: {multicluster.dynamo.nvidia.com/locality: "cluster,region"}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: echo-headless
  namespace: dynamo
  annotations: {multicluster.dynamo.nvidia.com/locality: "cluster,region"}
`

// answersPod sends a request through the address every 100 ms and logs the host's uptime
// (the test reads the same clock: pods share the kernel) with the answer, or FAIL.
const answersPod = `apiVersion: v1
kind: Pod
metadata:
  name: answers
  namespace: dynamo
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[2]s
    imagePullPolicy: Never
    command: ["/bin/sh", "-c"]
    args:
    - |
      while true; do
        read up idle < /proc/uptime
        if out=$(timeout 2 wget -q -O - http://%[1]s:80/); then echo "$up $out"; else echo "$up FAIL"; fi
        sleep 0.1
      done
`

type answer struct {
	at   float64
	from string // the answering cluster; "FAIL" for a failed request
}

type answersClient struct{ cluster *harness.Cluster }

func startAnswers(t *testing.T, c *harness.Cluster, ip string) *answersClient {
	t.Helper()
	c.Apply(t, harness.DecodeYAML(t, "answers", []byte(fmt.Sprintf(answersPod, ip, harness.BusyboxImage)))...)
	a := &answersClient{cluster: c}
	harness.Eventually(t, "the answers pod's first answer", 2*time.Minute, func() string {
		if len(a.read(t)) == 0 {
			return "no answer yet"
		}
		return ""
	})
	return a
}

func (a *answersClient) read(t *testing.T) []answer {
	t.Helper()
	out, err := a.cluster.Kubectl("-n", "dynamo", "logs", "answers")
	if err != nil {
		return nil
	}
	var list []answer
	for _, l := range strings.Split(out, "\n") {
		at, from, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(at, 64)
		if err != nil {
			continue
		}
		list = append(list, answer{at: f, from: strings.TrimSpace(from)})
	}
	return list
}

// waitAnswers waits for n answers after since and returns them.
func (a *answersClient) waitAnswers(t *testing.T, since float64, n int) []answer {
	t.Helper()
	var got []answer
	harness.Eventually(t, fmt.Sprintf("%d answers", n), 2*time.Minute, func() string {
		got = got[:0]
		for _, x := range a.read(t) {
			if x.at > since {
				got = append(got, x)
			}
		}
		if len(got) < n {
			return fmt.Sprintf("%d answers", len(got))
		}
		return ""
	})
	return got[:n]
}

// waitSettled waits until only the cluster to has answered for 30 requests in a row after
// since, and returns how long after since the first of them came.
func (a *answersClient) waitSettled(t *testing.T, since float64, to string) float64 {
	t.Helper()
	var settled float64
	harness.Eventually(t, "only "+to+" answers", 2*time.Minute, func() string {
		run, first, last := 0, 0.0, ""
		for _, x := range a.read(t) {
			if x.at <= since {
				continue
			}
			if x.from != to {
				run, last = 0, x.from
				continue
			}
			if run == 0 {
				first = x.at
			}
			run++
		}
		if run < 30 {
			return fmt.Sprintf("%d answers of %s in a row; the last other: %q", run, to, last)
		}
		settled = first - since
		return ""
	})
	return settled
}

// tally counts the answers after since: those of from, all of them, and the failed ones.
func tally(list []answer, since float64, from string) (own, total, failed int) {
	for _, a := range list {
		if a.at <= since {
			continue
		}
		total++
		switch a.from {
		case from:
			own++
		case "FAIL":
			failed++
		}
	}
	return own, total, failed
}

// uptime is this host's /proc/uptime, the clock the answers pod stamps its lines with.
func uptime(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readinessFlip is the floor of a tier change: how long after since the cluster's own
// EndpointSlices of the echo Service had replicas ready endpoints (what kube-proxy in that
// cluster would follow), polled every 50 ms; -1 after a minute.
func readinessFlip(c *harness.Cluster, replicas int, since float64) float64 {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var list discoveryv1.EndpointSliceList
		if err := c.Client.List(context.Background(), &list, client.InNamespace("dynamo"), client.MatchingLabels{discoveryv1.LabelServiceName: "echo"}); err == nil {
			ready := 0
			for _, s := range list.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						ready++
					}
				}
			}
			if ready == replicas {
				b, _ := os.ReadFile("/proc/uptime")
				if f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64); err == nil {
					return f - since
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// lookup resolves a name from the answers pod's cluster with nslookup, sorted.
func lookup(t *testing.T, c *harness.Cluster, name string) []string {
	t.Helper()
	out, _ := c.Kubectl("exec", "-n", "dynamo", "answers", "--", "nslookup", name)
	var addrs []string
	past := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Name:") {
			past = true
		}
		if a, ok := strings.CutPrefix(l, "Address: "); ok && past {
			addrs = append(addrs, strings.TrimSpace(a))
		}
	}
	sort.Strings(addrs)
	return addrs
}
