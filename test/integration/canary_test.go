package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

var canaryP99 = regexp.MustCompile(`(\S+) p50=([0-9.]+)s p99=([0-9.]+)s n=([0-9]+)`)

// canaryFigures reads a cluster's canary summary (the annotation of its canary
// ServiceExport): p99 and sample count by source cluster.
func canaryFigures(t *testing.T, c *harness.Cluster) (map[string]float64, map[string]int) {
	t.Helper()
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: harness.ReleaseNamespace, Name: "mcs-canary"}, se); err != nil {
		return nil, nil
	}
	p99, n := map[string]float64{}, map[string]int{}
	for _, m := range canaryP99.FindAllStringSubmatch(se.Annotations["multicluster.dynamo.nvidia.com/propagation"], -1) {
		p99[m[1]], _ = strconv.ParseFloat(m[3], 64)
		n[m[1]], _ = strconv.Atoi(m[4])
	}
	return p99, n
}

// TestCanaryPropagation: three clusters with the canary every second. Each controller
// measures every other cluster's canary (mcs_controller_propagation_seconds, the summary on
// its canary ServiceExport, mcs-admin diagnose), and in the same run the canary's p99
// agrees within 2x with the propagation benchmark's measure of a readiness flip from
// cluster a to b and c (BenchmarkPropagationReadinessFlip's method).
func TestCanaryPropagation(t *testing.T) {
	reg := harness.StartRegistry(t, "--store=memory")
	cls, ctls := threeClusters(t, reg, []string{"--canary-interval=1s"}, "dynamo")

	// The benchmark's measure: a readiness flip in a, until b and c both show it.
	flip := newFlipper(t, cls)
	var flips []time.Duration
	for i := range 30 {
		time.Sleep(800 * time.Millisecond)
		took, _ := flip(i%2 == 1)
		flips = append(flips, took)
	}
	slices.Sort(flips)
	flipP99 := flips[int(0.99*float64(len(flips)-1))].Seconds()

	// The canary, over the same time: every cluster measures the two others.
	var canary []float64
	harness.Eventually(t, "every cluster's canary figures", 60*time.Second, func() string {
		canary = canary[:0]
		for _, c := range cls {
			p99, n := canaryFigures(t, c)
			for _, other := range cls {
				if other == c {
					continue
				}
				if n[other.Name] < 10 {
					return fmt.Sprintf("%s measured %s %d times", c.Name, other.Name, n[other.Name])
				}
				canary = append(canary, p99[other.Name])
			}
		}
		return ""
	})
	canaryMax := slices.Max(canary)
	t.Logf("FIGURE propagation p99: canary %.3f s (worst of the 6 cluster pairs; all %v), readiness flip a→b,c %.3f s (30 flips, the benchmark's method)", canaryMax, canary, flipP99)
	if ratio := canaryMax / flipP99; ratio > 2 || ratio < 0.5 {
		t.Errorf("the canary's p99 %.3f s and the benchmark's %.3f s differ by more than 2x", canaryMax, flipP99)
	}

	// The histogram, linted by promtool.
	for i, c := range cls {
		ctlMetrics := ""
		harness.Eventually(t, c.Name+": the propagation histogram", 30*time.Second, func() string {
			_, ctlMetrics = get(t, "http://"+ctls[i].MetricsAddr+"/metrics")
			for _, other := range cls {
				if other != c && !strings.Contains(ctlMetrics, `mcs_controller_propagation_seconds_count{source_cluster="`+other.Name+`"}`) {
					return grepLines(ctlMetrics, "mcs_controller_propagation")
				}
			}
			return ""
		})
		harness.CheckMetrics(t, "http://"+ctls[i].MetricsAddr+"/metrics")
	}

	// mcs-admin diagnose shows the figures.
	out, err := execAdminRegistry(t, "diagnose", "--kubeconfig="+cls[1].Kubeconfig)
	if !strings.Contains(out, "propagation") || !strings.Contains(out, "a p50=") {
		t.Errorf("diagnose does not show the canary's figures: %v\n%s", err, out)
	}
	t.Logf("diagnose of cluster b:\n%s", out)
}
