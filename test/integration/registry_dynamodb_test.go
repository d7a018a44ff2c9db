package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// dynamoRegistry starts the real registry on a DynamoDB table of d (the harness gives it
// dynoxide's credentials).
func dynamoRegistry(t *testing.T, d *harness.DynamoDB, table string, extra ...string) *harness.Registry {
	t.Helper()
	return harness.StartRegistry(t, append([]string{"--store=dynamodb", "--dynamodb-table=" + table, "--region=" + d.Region, "--endpoint-url=" + d.Endpoint}, extra...)...)
}

func newTable(t testing.TB, d *harness.DynamoDB) string {
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

// TestRegistryDynamoDBPoisonItems: items the store does not write — an export with a
// sort key of the wrong shape, a cluster without a lease, an export whose spec is not a
// protobuf message, a key outside the schema — written straight into the table (as a
// damaged or foreign writer would, and a Global Table would replicate) neither crash the
// registry nor hide the good records: they are skipped, counted and logged, through the
// stream and through reads, and again after a restart.
func TestRegistryDynamoDBPoisonItems(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	reg := dynamoRegistry(t, d, table)
	c := dial(t, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a",
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "svc"}, Spec: relaySpec(80), EndpointGroups: endpoints("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	sv := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	for _, item := range []map[string]ddbtypes.AttributeValue{
		{"PK": sv("CS#prod"), "SK": sv("EXPORT#junk")},
		{"PK": sv("CS#prod"), "SK": sv("CLUSTER#no-lease")},
		{"PK": sv("CS#prod"), "SK": sv("EXPORT#dynamo/bad-spec#use1-a"), "spec": &ddbtypes.AttributeValueMemberB{Value: []byte{0xff, 0xff}}},
		{"PK": sv("junk"), "SK": sv("junk")},
	} {
		if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod"})
		if err != nil || len(list.GetExports()) != 1 || list.GetExports()[0].GetService().GetName() != "svc" {
			t.Fatalf("%s: exports %v, %v; want the one good export", when, list, err)
		}
		clusters, err := c.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "prod"})
		if err != nil || len(clusters.GetClusters()) != 1 {
			t.Fatalf("%s: clusters %v, %v; want the one good cluster", when, clusters, err)
		}
		imp, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
		if err != nil || len(imp.GetImports()) != 1 {
			t.Fatalf("%s: imports %v, %v", when, imp, err)
		}
		waitMetricAtLeast(t, reg.AdminAddr, "mcs_registry_store_bad_items_total", 3)
		if exited, err := reg.Exited(); exited {
			t.Fatalf("%s: the registry exited: %v\n%s", when, err, reg.Output())
		}
		for _, key := range []string{`sk=EXPORT#junk`, `sk=CLUSTER#no-lease`, `sk=EXPORT#dynamo/bad-spec#use1-a`} {
			if !strings.Contains(reg.Output(), key) {
				t.Errorf("%s: the registry did not log the bad item %s", when, key)
			}
		}
	}
	// Give the stream reader time to see the records.
	time.Sleep(2 * time.Second)
	check("running")
	reg.Restart(t)
	c = dial(t, reg.GRPCAddr)
	check("after a restart")
}

func waitMetricAtLeast(t *testing.T, addr, name string, least float64) {
	t.Helper()
	harness.Eventually(t, name, 20*time.Second, func() string {
		_, body := get(t, "http://"+addr+"/metrics")
		if v, err := harness.MetricIn(body, name); err == nil && v >= least {
			return ""
		}
		return grepLines(body, name)
	})
}
