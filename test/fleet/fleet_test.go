// Package fleet runs the fleet simulator (controller/internal/cmd/mcs-fleet) against the
// real registry: a test that a hundred simulated clusters converge, follow churn and come
// back after a restart, and the benchmark behind docs/registry.md's "Scale" table.
package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestFleetConverges: 100 simulated clusters (20 Services of 10 endpoints each, the same
// names in every cluster) register with a memory registry and converge; follow 10 flips a
// second for 5 s with none lost; and after the registry restarts empty, every cluster is
// served again with no cluster ever without another's endpoints (the controller's hold).
func TestFleetConverges(t *testing.T) {
	reg := harness.StartRegistry(t, "--store=memory")
	events, _ := harness.RunFleet(t, []string{"--registry-url", "http://" + reg.GRPCAddr, "--clusters", "100",
		"--steady", "2s", "--churn", "5s", "--churn-rate", "10", "--restart", "--converge-timeout", "2m"},
		func(ev harness.FleetEvent) {
			if ev.Event == "restart_await" {
				reg.Restart(t)
			}
		})
	got := map[string]harness.FleetEvent{}
	for _, ev := range events {
		got[ev.Event] = ev
	}
	steady, churn, back := got["steady_end"], got["churn_end"].Churn, got["restart_end"].Restart
	if churn == nil || back == nil {
		t.Fatalf("the simulator did not report every phase: %+v", events)
	}
	if steady.VerifyErrors+steady.SyncErrors > 0 || steady.Syncs < 100 {
		t.Errorf("steady state: %d syncs (want 100, one per cluster), %d failed checks, %d failed syncs; last error %q", steady.Syncs, steady.VerifyErrors, steady.SyncErrors, steady.LastError)
	}
	if churn.Flips < 25 || churn.PutErrors > 0 || churn.Missed > 0 {
		t.Errorf("churn: %d flips (want at least 25), %d refused, %d not seen by every cluster", churn.Flips, churn.PutErrors, churn.Missed)
	}
	if back.WithoutSeconds > 0 {
		t.Errorf("after the registry restarted, %d clusters spent up to %.1f s without another cluster's endpoints (%s); want none", back.ClustersWithout, back.WithoutSeconds, back.Example)
	}
	t.Logf("converged in %.1f s; flips to all 100 clusters p50 %.1f ms, p99 %.1f ms (PutExport p50 %.1f ms); served again %.1f s after the restart",
		got["converged"].Seconds, churn.AllP50, churn.AllP99, churn.PutP50, back.ServedAgainSeconds)
}

// BenchmarkFleet measures the registry with a fleet of simulated clusters. Method: for each
// size N of FLEET_CLUSTERS (default 100,300,1000), a new memory registry and the fleet
// simulator (one process: N clusters, each with the controller's own pool, session and
// import watch, S=20 Services of E=10 endpoints, the controller's default lease, renewal
// and export check, all starting at once). Measured from outside the registry
// (/proc/<pid>): CPU cores, RSS, threads and bytes written per second over the steady
// phase (FLEET_STEADY, default 70s: every cluster renews 7 times and checks its exports
// once, at the controller's defaults; no change), and the
// goroutines from its /metrics; from the simulator: the time to converge, one readiness
// flip (5 a second for FLEET_CHURN, default 30s) until every cluster's watch shows it
// (p50/p99) against its floor, the PutExport's own round trip in the same run, and the
// bytes each watch received per flip; then the registry restarts (empty): the time until
// every cluster is served again and the longest any cluster was without another's
// endpoints. FLEET_STORES=memory,dynamodb adds the DynamoDB store (one replica on dynoxide;
// its steady phase also reports the capacity units per cluster-hour by operation, from the
// registry's mcs_registry_dynamodb_capacity_units_total; no restart). FLEET_LOG=<folder>
// keeps the registry's and the simulator's logs. FLEET_START_SPREAD=<duration> starts the
// clusters evenly over that long instead of all at once.
//
//	cd test && go test -run '^$' -bench Fleet -benchtime 1x -timeout 60m ./fleet/
func BenchmarkFleet(b *testing.B) {
	sizes := []int{100, 300, 1000}
	if v := os.Getenv("FLEET_CLUSTERS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				b.Fatalf("FLEET_CLUSTERS=%q: a comma-separated list of cluster counts", v)
			}
			sizes = append(sizes, n)
		}
	}
	stores := strings.Split(os.Getenv("FLEET_STORES"), ",")
	if stores[0] == "" {
		stores = []string{"memory"}
	}
	steady, churn := envDuration(b, "FLEET_STEADY", 70*time.Second), envDuration(b, "FLEET_CHURN", 30*time.Second)
	for _, st := range stores {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/clusters=%d", st, n), func(b *testing.B) {
				for b.Loop() {
					runFleet(b, st, n, steady, churn)
				}
			})
		}
	}
}

// fleetRegistries starts the registry replicas of one store and names their regions
// (nil: one replica, the simulator's default region): memory; dynamodb (one replica on
// dynoxide); dynamodb3 (three replicas, each on its own dynoxide "region", the table
// replicated among them one second late, last writer wins, as a Global Table).
func fleetRegistries(b *testing.B, st string) ([]*harness.Registry, []string) {
	switch st {
	case "memory":
		return []*harness.Registry{harness.StartRegistry(b, "--store=memory")}, nil
	case "dynamodb", "dynamodb3":
		regions := []string{"us-east-1"}
		if st == "dynamodb3" {
			regions = []string{"us-east-1", "us-west-2", "eu-west-1"}
		}
		table := harness.TableName(b)
		var dbs []*harness.DynamoDB
		for _, region := range regions {
			d := harness.StartDynamoDB(b)
			d.Region = region
			if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
				b.Fatal(err)
			}
			dbs = append(dbs, d)
		}
		if len(dbs) > 1 {
			harness.ReplicateAll(b, dbs, table, time.Second)
		}
		var regs []*harness.Registry
		for _, d := range dbs {
			regs = append(regs, harness.StartRegistry(b, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint))
		}
		if len(regs) == 1 {
			return regs, nil
		}
		return regs, regions
	}
	b.Fatalf("FLEET_STORES: unknown store %q (memory, dynamodb, dynamodb3)", st)
	return nil, nil
}

// capacity is the DynamoDB capacity units the replicas consumed so far, by operation, all
// regions together.
func capacity(b *testing.B, regs []*harness.Registry) map[string]float64 {
	out := map[string]float64{}
	for _, reg := range regs {
		samples, err := harness.Samples(harness.Scrape(b, "http://"+reg.AdminAddr+"/metrics"), "mcs_registry_dynamodb_capacity_units_total")
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range samples {
			out[s.Labels["operation"]] += s.Value
		}
	}
	return out
}

// procStats reads each replica's /proc figures.
func procStats(regs []*harness.Registry) []harness.ProcStat {
	var out []harness.ProcStat
	for _, r := range regs {
		out = append(out, harness.ReadProcStat(r.Pid()))
	}
	return out
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: a positive duration", name, v)
	}
	return d
}

func runFleet(b *testing.B, st string, n int, steady, churn time.Duration) {
	regs, regions := fleetRegistries(b, st)
	reg := regs[0]
	var before, after []harness.ProcStat
	var t0, t1 time.Time
	var goroutines float64
	var cu0, cu1 map[string]float64
	var urls []string
	for _, r := range regs {
		urls = append(urls, "http://"+r.GRPCAddr)
	}
	args := []string{"--registry-url", strings.Join(urls, ","), "--clusters", strconv.Itoa(n),
		"--steady", steady.String(), "--churn", churn.String(), "--churn-rate", "5", "--converge-timeout", "10m"}
	if len(regions) > 0 {
		args = append(args, "--regions", strings.Join(regions, ","))
	}
	if os.Getenv("FLEET_START_SPREAD") != "" {
		args = append(args, "--start-spread", envDuration(b, "FLEET_START_SPREAD", 0).String())
	}
	restart := st == "memory" // a DynamoDB replica's restart is not measured yet
	if restart {
		args = append(args, "--restart")
	}
	events, simLog := harness.RunFleet(b, args,
		func(ev harness.FleetEvent) {
			switch ev.Event {
			case "steady_begin":
				before, t0 = procStats(regs), time.Now()
				if st != "memory" {
					cu0 = capacity(b, regs)
				}
			case "steady_end":
				after, t1 = procStats(regs), time.Now()
				for _, r := range regs {
					goroutines = max(goroutines, harness.Metric(b, "http://"+r.AdminAddr+"/metrics", "go_goroutines"))
				}
				if st != "memory" {
					cu1 = capacity(b, regs)
				}
			case "restart_await":
				reg.Restart(b)
			}
		})
	if dir := os.Getenv("FLEET_LOG"); dir != "" {
		// The registry's and the simulator's logs, for a closer look.
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("registry-%d.log", n)), []byte(reg.Output()), 0o644)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("fleet-%d.log", n)), []byte(simLog), 0o644)
	}
	got := map[string]harness.FleetEvent{}
	for _, ev := range events {
		got[ev.Event] = ev
	}
	c, back := got["churn_end"].Churn, got["restart_end"].Restart
	if c == nil || (restart && back == nil) {
		b.Fatalf("the simulator did not report every phase: %+v", events)
	}
	secs := t1.Sub(t0).Seconds()
	for op, v := range cu1 {
		b.ReportMetric((v-cu0[op])/secs*3600/float64(n), "CU-"+op+"/cluster-hour")
	}
	b.ReportMetric(got["converged"].Seconds, "s-converge")
	// Per replica: the busiest replica's CPU and bytes, the largest RSS and goroutines.
	var cores, written, rss float64
	for i := range regs {
		cores = max(cores, (after[i].CPUSeconds-before[i].CPUSeconds)/secs)
		written = max(written, float64(after[i].WrittenBytes-before[i].WrittenBytes)/secs)
		rss = max(rss, after[i].RSSMiB)
	}
	b.ReportMetric(cores, "cores-steady")
	b.ReportMetric(rss, "MiB-rss-steady")
	b.ReportMetric(goroutines, "goroutines-steady")
	b.ReportMetric(written, "B/s-written-steady")
	b.ReportMetric(c.AllP50, "ms-flip-to-all-p50")
	b.ReportMetric(c.AllP99, "ms-flip-to-all-p99")
	b.ReportMetric(c.PutP50, "ms-floor-put-p50")
	b.ReportMetric(float64(c.Missed+c.PutErrors), "flips-lost")
	if c.Flips > 0 {
		b.ReportMetric(float64(c.WatchBytes)/float64(c.Flips)/float64(n), "B/flip-per-watch")
	}
	if back != nil {
		b.ReportMetric(back.ServedAgainSeconds, "s-served-after-restart")
		b.ReportMetric(back.WithoutSeconds, "s-without-endpoints")
		b.ReportMetric(float64(back.WatchBytes)/float64(n)/(1<<20), "MiB/watch-restart")
	}
}
