package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestOneBadStoredItemCostsOnlyItself: export items whose endpoint chunks are missing
// (chunks=2 without the chunk items; chunks=2^40) and a real chunked export with garbage
// in one chunk cost those exports alone, on every replica: other clusters' writes, lists
// and watches go on through both running replicas; both running replicas and a freshly
// started one agree that the damaged export is gone; each is counted, logged with its
// key, listed by mcs-admin describe and removed by mcs-admin delete-export. Before, the
// missing chunks made every call of the clusterset UNAVAILABLE on every replica, and the
// damaged chunk was served by running replicas but dropped by a new one.
func TestOneBadStoredItemCostsOnlyItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	a, b := dynamoRegistry(t, d, table), dynamoRegistry(t, d, table)
	ca, cb := dial(t, a.GRPCAddr), dial(t, b.GRPCAddr)
	for _, id := range []string{"a", "big"} {
		if _, err := ca.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id}); err != nil {
			t.Fatal(err)
		}
	}
	// A real export large enough to be stored in chunks.
	bigSvc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "big"}
	groups := manyEndpoints(10000)
	for i, ep := range groups[0].GetEndpoints() {
		ep.Hostname = fmt.Sprintf("replica-with-a-long-hostname-%05d", i)
	}
	if _, err := ca.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "big", Service: bigSvc, Spec: &registryv1.ExportSpec{
		Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS, Ports: relaySpec(80).GetPorts()}, EndpointGroups: groups}); err != nil {
		t.Fatal(err)
	}
	chunks, err := d.Client().Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: "CS#prod"}, ":p": &ddbtypes.AttributeValueMemberS{Value: "EPS#dynamo/big#big#"}}})
	if err != nil || len(chunks.Items) < 2 {
		t.Fatalf("the big export's chunks: %d, %v; want at least 2", len(chunks.Items), err)
	}
	// Two small exports of cluster a, damaged below as a damaged item or a writer of its
	// own shape (one that keeps the cluster's usage) leaves them.
	for _, name := range []string{"ghost", "huge"} {
		if _, err := ca.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name},
			Spec: relaySpec(80), EndpointGroups: endpoints("10.9.0.9")}); err != nil {
			t.Fatal(err)
		}
	}
	// Watches on both replicas see the big export first.
	watches := map[string]registryv1.RegistryService_WatchImportsClient{}
	for name, c := range map[string]registryv1.RegistryServiceClient{"A": ca, "B": cb} {
		w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		// The snapshot holds the big export before it is damaged (else there is no
		// deletion for the watch to see).
		m, err := w.Recv()
		var names []string
		for _, imp := range m.GetUpserts() {
			names = append(names, imp.GetService().GetName())
		}
		if err != nil || !m.GetSnapshot() || strings.Join(names, ",") != "big,ghost,huge" {
			t.Fatalf("replica %s's first watch message: %v, %v; want a snapshot of the big, ghost and huge exports", name, names, err)
		}
		watches[name] = w
	}

	// Cluster a's export items now name chunks that do not exist (written as of now, so
	// the replicas take them for the newest write of each).
	spec, _ := proto.Marshal(relaySpec(80))
	sv := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	nv := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	for _, g := range []struct{ name, chunks string }{{"ghost", "2"}, {"huge", "1099511627776"}} {
		item := map[string]ddbtypes.AttributeValue{"PK": sv("CS#prod"), "SK": sv("EXPORT#dynamo/" + g.name + "#a"), "spec": &ddbtypes.AttributeValueMemberB{Value: spec},
			"gen": sv("0123456789ab"), "chunks": nv(g.chunks), "createMs": nv("1"), "updateMs": nv(fmt.Sprint(time.Now().UnixMilli())), "writeUs": nv(fmt.Sprint(time.Now().UnixMicro()))}
		if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	// Garbage in one chunk of the big export.
	garbled := chunks.Items[1]
	garbled["data"] = &ddbtypes.AttributeValueMemberB{Value: []byte{0xff, 0xff, 0xff}}
	if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: garbled}); err != nil {
		t.Fatal(err)
	}

	// Every replica goes on serving the other clusters: a write through each, seen by each
	// replica's watch.
	for name, c := range map[string]registryv1.RegistryServiceClient{"A": ca, "B": cb} {
		svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "good-" + strings.ToLower(name)}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.9.0.1")}); err != nil {
			t.Fatalf("a write through replica %s beside the bad items: %v", name, err)
		}
	}
	// Each replica's watch: both good exports, and the big export deleted (its running
	// replicas apply the rule a full read applies).
	for name, w := range watches {
		seen, bigGone := map[string]bool{}, false
		for !seen["good-a"] || !seen["good-b"] || !bigGone {
			m, err := w.Recv()
			if err != nil {
				t.Fatalf("the watch on replica %s: %v", name, err)
			}
			for _, imp := range m.GetUpserts() {
				seen[imp.GetService().GetName()] = true
			}
			for _, del := range m.GetDeletes() {
				bigGone = bigGone || del.GetName() == "big"
			}
		}
	}
	c := dynamoRegistry(t, d, table) // freshly started
	cc := dial(t, c.GRPCAddr)
	for name, cl := range map[string]registryv1.RegistryServiceClient{"A": ca, "B": cb, "new": cc} {
		imp, err := cl.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod"})
		if err != nil {
			t.Fatalf("imports through replica %s: %v", name, err)
		}
		var names []string
		for _, i := range imp.GetImports() {
			names = append(names, i.GetService().GetName())
		}
		if got := strings.Join(names, ","); got != "good-a,good-b" {
			t.Errorf("imports through replica %s: %s; want good-a,good-b (the damaged exports skipped alike on every replica)", name, got)
		}
		list, err := cl.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod"})
		if err != nil {
			t.Fatalf("exports through replica %s: %v", name, err)
		}
		var bad []string
		for _, u := range list.GetUnreadable() {
			bad = append(bad, u.GetKey())
		}
		if got := strings.Join(bad, ","); got != "EXPORT#dynamo/big#big,EXPORT#dynamo/ghost#a,EXPORT#dynamo/huge#a" {
			t.Errorf("unreadable items through replica %s: %s", name, got)
		}
	}
	// One cluster's list (a controller's export check) holds its own bad items and no
	// other cluster's.
	mine, err := cc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"})
	if err != nil {
		t.Fatalf("cluster a's exports: %v", err)
	}
	var mineBad, mineGood []string
	for _, u := range mine.GetUnreadable() {
		mineBad = append(mineBad, u.GetKey())
	}
	for _, e := range mine.GetExports() {
		mineGood = append(mineGood, e.GetClusterId()+":"+e.GetService().GetName())
	}
	if got := strings.Join(mineBad, ","); got != "EXPORT#dynamo/ghost#a,EXPORT#dynamo/huge#a" {
		t.Errorf("cluster a's unreadable items: %s; want its two", got)
	}
	for _, e := range mineGood {
		if !strings.HasPrefix(e, "a:") {
			t.Errorf("cluster a's exports hold %s", e)
		}
	}
	for name, r := range map[string]*harness.Registry{"A": a, "B": b, "new": c} {
		waitMetricAtLeast(t, r.AdminAddr, "mcs_registry_store_bad_items_total", 1)
		for _, key := range []string{"sk=EXPORT#dynamo/ghost#a", "sk=EXPORT#dynamo/big#big"} {
			if !strings.Contains(r.Output(), key) {
				t.Errorf("replica %s did not log the bad item %s", name, key)
			}
		}
	}

	// The operator finds them with describe and removes them with delete-export.
	out, err := execAdmin(t, d, "--region="+d.Region, "--table="+table, "describe", "--clusterset-id=prod")
	if err != nil || !strings.Contains(out, "UNREADABLE") || !strings.Contains(out, "EXPORT#dynamo/ghost#a") || !strings.Contains(out, "0 of 2") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, del := range []struct{ cluster, svc string }{{"a", "dynamo/ghost"}, {"a", "dynamo/huge"}} {
		if out, err := execAdmin(t, d, "--region="+d.Region, "--table="+table, "delete-export", "--clusterset-id=prod", "--cluster-id="+del.cluster, del.svc, "--yes"); err != nil {
			t.Fatalf("delete-export %s: %v\n%s", del.svc, err, out)
		}
	}
	if out, err := execAdminRegistry(t, "--registry-rest-url=http://"+b.RESTAddr, "delete-export", "--clusterset-id=prod", "--cluster-id=big", "dynamo/big", "--yes"); err != nil {
		t.Fatalf("delete-export through the registry: %v\n%s", err, out)
	}
	list, err := cc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod"})
	if err != nil || len(list.GetUnreadable()) != 0 || len(list.GetExports()) != 2 {
		t.Fatalf("after delete-export: %d unreadable, %d exports, %v; want 0 and 2", len(list.GetUnreadable()), len(list.GetExports()), err)
	}
	rest, err := d.Client().Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": sv("CS#prod"), ":p": sv("EPS#")}})
	if err != nil || len(rest.Items) != 0 {
		t.Errorf("chunk items left after delete-export: %d, %v", len(rest.Items), err)
	}
}
