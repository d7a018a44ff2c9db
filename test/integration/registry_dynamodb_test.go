package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// dynamoRegistry starts the real registry on a DynamoDB table of d.
func dynamoRegistry(t *testing.T, d *harness.DynamoDB, table string) *harness.Registry {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", harness.DynamoDBAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", harness.DynamoDBSecretKey)
	return harness.StartRegistry(t, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint)
}

func newTable(t *testing.T, d *harness.DynamoDB) string {
	t.Helper()
	table := harness.TableName(t)
	if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
		t.Fatal(err)
	}
	return table
}

// TestRegistryDynamoDBRestart: with the DynamoDB store a registry restart loses nothing.
func TestRegistryDynamoDBRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	reg := dynamoRegistry(t, d, newTable(t, d))
	c := dial(t, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a", Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1")}); err != nil {
		t.Fatal(err)
	}
	_, before := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports?includeEndpoints=true")
	reg.Restart(t)
	_, clusters := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters")
	if !strings.Contains(clusters, `"clusterId":"use1-a","region":"us-east-1","lease":{"state":"LEASE_STATE_ACTIVE"`) {
		t.Fatalf("cluster lost in a restart: %s", clusters)
	}
	_, after := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports?includeEndpoints=true")
	trim := func(s string) string { return s[:strings.Index(s, `"revision"`)] } // the epoch differs per process
	if trim(after) != trim(before) || !strings.Contains(after, "10.1.0.1") {
		t.Fatalf("imports changed in a restart:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatalf("renewal after restart: %v", err)
	}
}

// TestTwoRegistriesOneTable: two registry replicas on one table see each other's writes,
// and a watch on one gets a change written through the other (via the table's stream).
func TestTwoRegistriesOneTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	a, b := dynamoRegistry(t, d, table), dynamoRegistry(t, d, table)
	ca, cb := dial(t, a.GRPCAddr), dial(t, b.GRPCAddr)
	if _, err := ca.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatal(err)
	}
	watch, err := cb.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || !m.GetSnapshot() {
		t.Fatalf("first message %v %v", m, err)
	}
	start := time.Now()
	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "svc"}
	if _, err := ca.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1")}); err != nil {
		t.Fatal(err)
	}
	m, err := watch.Recv()
	if err != nil || len(m.GetUpserts()) != 1 || m.GetUpserts()[0].GetClusters()[0].GetEndpointGroups()[0].GetEndpoints()[0].GetAddresses()[0] != "10.1.0.1" {
		t.Fatalf("watch on the other replica: %v %v", m, err)
	}
	t.Logf("a write on replica A reached a watch on replica B in %s", time.Since(start).Round(time.Millisecond))
	// A renewal through B of a cluster registered through A, and a read through B.
	if _, err := cb.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatal(err)
	}
	// A cluster deleted through B cannot renew through A.
	if _, err := cb.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}); err == nil || !strings.Contains(err.Error(), "register the cluster first") {
		t.Fatalf("renewal of a deleted cluster through the other replica: %v", err)
	}
	if m, err := watch.Recv(); err != nil || len(m.GetDeletes()) != 1 {
		t.Fatalf("the deletion did not reach the watch: %v %v", m, err)
	}
}
