package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// capacity sums mcs_registry_dynamodb_capacity_units_total into reads (GetItem, Query) and
// writes (the rest).
func capacity(b *testing.B, reg *harness.Registry) (reads, writes float64) {
	_, body, err := harness.Get("http://" + reg.AdminAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "mcs_registry_dynamodb_capacity_units_total{") {
			continue
		}
		v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if strings.Contains(l, `"GetItem"`) || strings.Contains(l, `"Query"`) {
			reads += v
		} else {
			writes += v
		}
	}
	return reads, writes
}

// BenchmarkDynamoDBClusterHour replays one hour of one cluster's steady-state traffic
// against the real registry on dynoxide — 360 lease renewals (every 10 s) and 60 export
// verifications (every 6 renewals: ListExports of the cluster with endpoints, and
// ListImports) — for a cluster with 10 exports of 10 endpoints, and reports the DynamoDB
// capacity units it consumed, as DynamoDB reports them (ReturnConsumedCapacity).
//
//	cd test && go test -run '^$' -bench DynamoDBClusterHour -benchtime 1x ./integration/
func BenchmarkDynamoDBClusterHour(b *testing.B) {
	ctx := context.Background()
	d := harness.StartDynamoDB(b)
	table := harness.TableName(b)
	out, err := execAdmin(b, d, "create-table", "--table="+table, "--region="+d.Region)
	if err != nil {
		b.Fatalf("create-table: %v %s", err, out)
	}
	b.Setenv("AWS_ACCESS_KEY_ID", harness.DynamoDBAccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", harness.DynamoDBSecretKey)
	// The cost of one cluster: the replica's own replication heartbeats (a fixed cost per
	// replica, docs/storage.md) are left out.
	reg := harness.StartRegistry(b, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint, "--replication-heartbeat-interval=0")
	c := dial(b, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a", Region: "us-east-1"}); err != nil {
		b.Fatal(err)
	}
	req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "use1-a"}
	for s := range 10 {
		var ips []string
		for e := range 10 {
			ips = append(ips, fmt.Sprintf("10.1.%d.%d", s, e))
		}
		req.Exports = append(req.Exports, &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%d", s)}, Spec: relaySpec(80), EndpointGroups: endpoints(ips...)})
	}
	if _, err := c.SyncExports(ctx, req); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // let the stream-driven refreshes of the setup finish
	for b.Loop() {
		r0, w0 := capacity(b, reg)
		for i := 1; i <= 360; i++ {
			if _, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
				b.Fatal(err)
			}
			if i%6 == 0 {
				if _, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "use1-a", IncludeEndpoints: true}); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod"}); err != nil {
					b.Fatal(err)
				}
			}
		}
		time.Sleep(2 * time.Second) // the stream-driven refreshes of the last renewals
		r1, w1 := capacity(b, reg)
		b.ReportMetric(r1-r0, "RCU/cluster-hour")
		b.ReportMetric(w1-w0, "WCU/cluster-hour")
	}
}
