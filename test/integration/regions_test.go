package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// volatile are the parts of an answer that differ between replicas that agree: the
// revision, lease times, and the answering replica's region and measured lag.
var volatile = regexp.MustCompile(`"(revision|epoch|renewTime|expireTime|replicationLag)":("[^"]*"|null)|,"region":"[^"]*","replicationLags":\[[^\]]*\]`)

// converge waits until both registries answer path the same way (revision, epoch and lease
// times aside) and the answer passes ok; it returns the time it took.
func converge(t *testing.T, a, b *harness.Registry, path string, ok func(string) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var ba, bb string
	for time.Since(start) < 60*time.Second {
		_, ba = get(t, "http://"+a.RESTAddr+path)
		_, bb = get(t, "http://"+b.RESTAddr+path)
		ba, bb = volatile.ReplaceAllString(ba, ""), volatile.ReplaceAllString(bb, "")
		if ba == bb && ok(ba) {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not converge:\nregion A %s\nregion B %s", path, ba, bb)
	return 0
}

// twoRegions starts two DynamoDB servers, us-east-1 and us-west-2, with the table in
// both, replicated two seconds late as a Global Table.
func twoRegions(t *testing.T, ctx context.Context) (d1, d2 *harness.DynamoDB, table string, repl *harness.Replicator) {
	t.Helper()
	d1, d2 = harness.StartDynamoDB(t), harness.StartDynamoDB(t)
	d2.Region = "us-west-2"
	table = harness.TableName(t)
	for _, d := range []*harness.DynamoDB{d1, d2} {
		if _, err := dynamostore.CreateTable(ctx, d.Client(), table); err != nil {
			t.Fatal(err)
		}
	}
	return d1, d2, table, harness.Replicate(t, d1, d2, table, 2*time.Second)
}

// TestTwoRegions runs a registry in each of two "regions" — two DynamoDB servers whose
// tables a test replicator keeps in sync asynchronously, two seconds late, last writer wins,
// as Global Tables do — and checks that both regions converge to the same clusters and
// imports under concurrent exports, renewals in both regions, and a cluster deleted in one
// region while it renews in the other.
func TestTwoRegions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d1, d2, table, _ := twoRegions(t, ctx)
	ra, rb := dynamoRegistry(t, d1, table), dynamoRegistry(t, d2, table)
	ca, cb := dial(t, ra.GRPCAddr), dial(t, rb.GRPCAddr)

	// Each region registers its own cluster; then both export the same Service at once,
	// with different ports.
	if _, err := ca.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a", Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "usw2-a", Region: "us-west-2"}); err != nil {
		t.Fatal(err)
	}
	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "relay"}
	errs := make(chan error, 2)
	go func() {
		_, err := ca.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1")})
		errs <- err
	}()
	go func() {
		_, err := cb.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "usw2-a", Service: svc, Spec: relaySpec(81), EndpointGroups: endpoints("10.2.0.1")})
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	took := converge(t, ra, rb, "/v1/clustersets/prod/imports?includeEndpoints=true", func(s string) bool {
		return regexp.MustCompile(`10\.1\.0\.1.*10\.2\.0\.1`).MatchString(s) && regexp.MustCompile(`"conflicts":\["CONFLICT_REASON_PORT_CONFLICT"\]`).MatchString(s)
	})
	t.Logf("concurrent exports in two regions: the same imports in both after %s (replication delay 2s)", took.Round(10*time.Millisecond))

	// Renewals in both regions of a cluster registered in one.
	for range 3 {
		if _, err := cb.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
			t.Fatalf("renewal in the other region: %v", err)
		}
		if _, err := ca.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, ra, rb, "/v1/clustersets/prod/clusters", func(s string) bool {
		return regexp.MustCompile(`"clusterId":"use1-a".*"state":"LEASE_STATE_ACTIVE".*"clusterId":"usw2-a".*"state":"LEASE_STATE_ACTIVE"`).MatchString(s)
	})

	// usw2-a is deleted in region A while it renews in region B. The regions may keep
	// either outcome (last writer wins), but they converge to the same one, and the
	// cluster's exports are gone in both.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10; i++ {
			_, _ = cb.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "usw2-a"})
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if _, err := ca.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "usw2-a"}); err != nil {
		t.Fatal(err)
	}
	<-done
	took = converge(t, ra, rb, "/v1/clustersets/prod/imports?includeEndpoints=true", func(s string) bool {
		return !regexp.MustCompile(`10\.2\.0\.1`).MatchString(s) && regexp.MustCompile(`10\.1\.0\.1`).MatchString(s)
	})
	converge(t, ra, rb, "/v1/clustersets/prod/clusters", func(string) bool { return true })
	t.Logf("deletion in one region during renewals in the other: both regions agree after %s", took.Round(10*time.Millisecond))
}

// TestReplicationLagMetric: two regions replicated 2 s late. Each registry measures the
// other region's lag from the replication heartbeats (its own clock only): about the 2 s
// delay; while replication stalls, the lag grows with the stall; when it resumes, the lag
// falls back. The test prints the figures.
func TestReplicationLagMetric(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d1, d2, table, repl := twoRegions(t, ctx)
	ra, rb := dynamoRegistry(t, d1, table), dynamoRegistry(t, d2, table)
	lagAt := func(r *harness.Registry, source string) (float64, bool) {
		text := harness.Scrape(t, "http://"+r.AdminAddr+"/metrics")
		series := `mcs_registry_replication_lag_seconds{source_region="` + source + `"}`
		v, err := harness.MetricIn(text, series)
		return v, err == nil && strings.Contains(text, series+" ")
	}
	waitLag := func(what string, ok func(a, b float64) bool) (float64, float64) {
		t.Helper()
		var a, b float64
		harness.Eventually(t, what, 60*time.Second, func() string {
			var okA, okB bool
			a, okA = lagAt(ra, "us-west-2")
			b, okB = lagAt(rb, "us-east-1")
			if !okA || !okB || !ok(a, b) {
				return fmt.Sprintf("lag in region A of B %.1f s (%v), in region B of A %.1f s (%v)", a, okA, b, okB)
			}
			return ""
		})
		return a, b
	}
	a, b := waitLag("the 2 s replication delay measured", func(a, b float64) bool { return a >= 1 && a <= 4 && b >= 1 && b <= 4 })
	t.Logf("FIGURE replication lag with a 2 s delay: region A measures B at %.1f s, B measures A at %.1f s", a, b)

	repl.Pause()
	time.Sleep(10 * time.Second)
	a, b = waitLag("the stall measured", func(a, b float64) bool { return a >= 8 && b >= 8 })
	t.Logf("FIGURE replication lag 10 s into a stall: %.1f s and %.1f s", a, b)

	repl.Resume()
	resumed := time.Now()
	a, b = waitLag("the lag after the stall", func(a, b float64) bool { return a <= 4 && b <= 4 })
	t.Logf("FIGURE replication lag back to %.1f s and %.1f s %.1f s after replication resumed", a, b, time.Since(resumed).Seconds())
}
