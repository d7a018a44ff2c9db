package nodes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// trafficClient is a pod that sends a request through an address every 100 ms and logs
// "ok" or "FAIL <n> <time> <wget's error>" for each (busybox wget, 2 s timeout; an empty
// error is the timeout), so a failure says whether it was refused, reset or slow.
type trafficClient struct {
	cluster *harness.Cluster
	target  string
}

func startTraffic(t *testing.T, c *harness.Cluster, ip string) *trafficClient {
	t.Helper()
	tc := &trafficClient{cluster: c, target: "http://" + ip + ":80/"}
	// No double quote or backslash: the loop goes into a double-quoted YAML string. The
	// unquoted $err puts wget's message on the line.
	loop := fmt.Sprintf("n=0; while true; do n=$((n+1)); if err=$(timeout 2 wget -q -O /dev/null %s 2>&1); then echo ok; else echo FAIL $n $(date +%%T) $err; fi; sleep 0.1; done", tc.target)
	c.Apply(t, harness.DecodeYAML(t, "traffic", []byte(fmt.Sprintf(busyboxPod, "traffic", "dynamo", harness.BusyboxImage, loop)))...)
	harness.Eventually(t, "the traffic client's first answer", 2*time.Minute, func() string {
		out, err := c.Kubectl("-n", "dynamo", "logs", "traffic")
		if err != nil || !strings.Contains(out, "ok\n") {
			return fmt.Sprintf("%v: %.500s", err, out)
		}
		return ""
	})
	return tc
}

// results counts the answered and the failed requests after the first answer.
func (tc *trafficClient) results(t *testing.T) (ok int, failed []string) {
	t.Helper()
	out, err := tc.cluster.Kubectl("-n", "dynamo", "logs", "traffic")
	if err != nil {
		t.Fatalf("the traffic client's log: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "ok":
			ok++
		case strings.HasPrefix(l, "FAIL") && ok > 0:
			failed = append(failed, l)
		}
	}
	return ok, failed
}

// controllerScrape reads every controller pod's /metrics once a second, through the API
// server's pod proxy, and keeps each pod's last reading. A pod that stops takes with it
// what it counted after its last reading (at most a second).
type controllerScrape struct {
	mu     sync.Mutex
	last   countsByPod
	n      int
	cancel context.CancelFunc
	done   chan struct{}
}

// podCounts is what one controller pod counted since it started.
type podCounts struct {
	cluster, pod string
	image        string // the controller container's
	writes       writes
	errorsBy     map[string]float64
}

// writes are export writes the registry took (failed ones apart) and reconciler errors.
type writes struct {
	syncs, puts, deletes, failed, errors float64
}

func (w writes) String() string {
	return fmt.Sprintf("%d syncs, %d puts, %d deletes (%d failed)", int(w.syncs), int(w.puts), int(w.deletes), int(w.failed))
}

type countsByPod map[types.UID]podCounts

func scrapeControllers(t *testing.T, clusters []*harness.Cluster) *controllerScrape {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &controllerScrape{last: countsByPod{}, cancel: cancel, done: make(chan struct{})}
	var sets []*kubernetes.Clientset
	for _, c := range clusters {
		cs, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, cs)
	}
	round := func() {
		for i, cs := range sets {
			pods, err := cs.CoreV1().Pods("mcs-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mcs-controller"})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
					continue
				}
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				body, err := cs.CoreV1().Pods("mcs-system").ProxyGet("http", p.Name, "8080", "/metrics", nil).DoRaw(rctx)
				rcancel()
				if err != nil {
					continue
				}
				pc, err := parseControllerMetrics(string(body))
				if err != nil {
					continue // a body cut short (the pod stopping): the last good counts stay
				}
				pc.cluster, pc.pod = clusters[i].Name, p.Name
				if len(p.Spec.Containers) > 0 {
					pc.image = p.Spec.Containers[0].Image
				}
				s.mu.Lock()
				s.last[p.UID] = pc
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	round()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				round()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// counts returns each pod's last reading.
func (s *controllerScrape) counts() countsByPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.last)
}

// stop ends the scraping after one more reading of every pod.
func (s *controllerScrape) stop() countsByPod {
	time.Sleep(1500 * time.Millisecond)
	s.cancel()
	<-s.done
	return s.counts()
}

func (s *controllerScrape) rounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// since sums what the pods of cluster (all: "") counted after base.
func (c countsByPod) since(base countsByPod, cluster string) writes {
	var w writes
	for uid, pc := range c {
		if cluster != "" && pc.cluster != cluster {
			continue
		}
		b := base[uid].writes
		w.syncs += pc.writes.syncs - b.syncs
		w.puts += pc.writes.puts - b.puts
		w.deletes += pc.writes.deletes - b.deletes
		w.failed += pc.writes.failed - b.failed
		w.errors += pc.writes.errors - b.errors
	}
	return w
}

// of keeps the pods whose controller runs image.
func (c countsByPod) of(image string, want bool) countsByPod {
	out := countsByPod{}
	for uid, pc := range c {
		if (pc.image == image) == want {
			out[uid] = pc
		}
	}
	return out
}

// errorsBy names the pods and reconcilers that counted errors.
func (c countsByPod) errorsBy() string {
	var out []string
	for _, pc := range c {
		for ctrl, n := range pc.errorsBy {
			if n > 0 {
				out = append(out, fmt.Sprintf("%s/%s %s: %d", pc.cluster, pc.pod, ctrl, int(n)))
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// parseControllerMetrics reads mcs_controller_export_writes_total and
// controller_runtime_reconcile_errors_total from a Prometheus text exposition.
func parseControllerMetrics(text string) (podCounts, error) {
	pc := podCounts{errorsBy: map[string]float64{}}
	writes, err := harness.Samples(text, "mcs_controller_export_writes_total")
	if err != nil {
		return pc, err
	}
	for _, s := range writes {
		if s.Labels["result"] != "success" {
			pc.writes.failed += s.Value
			continue
		}
		switch s.Labels["op"] {
		case "sync":
			pc.writes.syncs += s.Value
		case "put":
			pc.writes.puts += s.Value
		case "delete":
			pc.writes.deletes += s.Value
		}
	}
	reconcileErrors, err := harness.Samples(text, "controller_runtime_reconcile_errors_total")
	if err != nil {
		return pc, err
	}
	for _, s := range reconcileErrors {
		pc.writes.errors += s.Value
		pc.errorsBy[s.Labels["controller"]] += s.Value
	}
	return pc, nil
}

func TestParseControllerMetrics(t *testing.T) {
	text := `# HELP mcs_controller_export_writes_total Export writes.
# TYPE mcs_controller_export_writes_total counter
mcs_controller_export_writes_total{op="sync",result="success"} 2
mcs_controller_export_writes_total{op="sync",result="failure"} 1
mcs_controller_export_writes_total{op="put",result="success"} 3
mcs_controller_export_writes_total{op="delete",result="success"} 4
controller_runtime_reconcile_errors_total{controller="serviceexport"} 5
controller_runtime_reconcile_errors_total{controller="serviceimport"} 0
controller_runtime_reconcile_total{controller="serviceimport",result="success"} 9
`
	got, err := parseControllerMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	want := writes{syncs: 2, puts: 3, deletes: 4, failed: 1, errors: 5}
	if got.writes != want || got.errorsBy["serviceexport"] != 5 {
		t.Fatalf("got %+v %v, want %+v", got.writes, got.errorsBy, want)
	}
	base := countsByPod{"a": {cluster: "x", writes: writes{syncs: 1}}}
	now := countsByPod{"a": {cluster: "x", writes: writes{syncs: 2}}, "b": {cluster: "x", writes: writes{puts: 1}}, "c": {cluster: "y", writes: writes{syncs: 7}}}
	if w := now.since(base, "x"); w != (writes{syncs: 1, puts: 1}) {
		t.Fatalf("since: %+v", w)
	}
}
