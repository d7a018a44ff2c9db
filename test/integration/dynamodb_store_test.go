package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/storetest"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestDynamoDBStoreConformance runs the store conformance suite against the DynamoDB
// store on dynoxide, a fresh table per test, with one request to the table in flight at
// a time (MaxRequests: the tightest bound; nothing in the store waits on a request it
// holds).
func TestDynamoDBStoreConformance(t *testing.T) {
	d := harness.StartDynamoDB(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		table := harness.TableName(t)
		if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
			t.Fatal(err)
		}
		return dynamostore.New(dynamostore.Options{
			Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table, MaxRequests: 1,
		})
	})
}

// TestDynamoDBStoreQuotaConformance runs the quota suite with replicas as the registry has
// them: several stores over one table on dynoxide, each checking the quota in its writes.
// Before, each replica checked its own cache, and one cluster held 38 exports of 20.
func TestDynamoDBStoreQuotaConformance(t *testing.T) {
	d := harness.StartDynamoDB(t)
	storetest.RunQuota(t, func(t *testing.T, q store.Quota, n int) []store.Store {
		table := harness.TableName(t)
		if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
			t.Fatal(err)
		}
		out := make([]store.Store, n)
		for i := range out {
			out[i] = dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table, Quota: q})
		}
		return out
	})
}

// TestOrphanedChunksSwept: a chunk of an export generation its item does not name, older
// than the sweep's age, is removed by the replica that reads the export, and counted; a
// young one (a write in flight) and one without a write time (an earlier release's) stay,
// and the export reads whole.
func TestOrphanedChunksSwept(t *testing.T) {
	ctx := context.Background()
	d := harness.StartDynamoDB(t)
	table := harness.TableName(t)
	if _, err := dynamostore.CreateTable(ctx, d.Client(), table); err != nil {
		t.Fatal(err)
	}
	swept := 0
	st := dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table,
		SweptChunks: func(n int) { swept += n }})
	now := time.Now()
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", Region: "us-east-1", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	// Endpoints past the inline limit (300 KB): stored in chunks.
	var eps []*registryv1.Endpoint
	for i := range 6000 {
		eps = append(eps, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)},
			Hostname: fmt.Sprintf("replica-%05d-of-a-large-inference-pool", i), Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
	}
	e := store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: store.ServiceKey{Namespace: "dynamo", Name: "big"},
		Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
		EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}, Endpoints: eps}},
		CreateTime:     now, UpdateTime: now}
	if _, err := st.PutExport(ctx, e); err != nil {
		t.Fatal(err)
	}
	chunk := func(gen string, createMs int64) string {
		sk := "EPS#dynamo/big#use1-a#" + gen + "#0"
		item := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CS#prod"}, "SK": &types.AttributeValueMemberS{Value: sk},
			"data": &types.AttributeValueMemberB{Value: []byte("left behind")}}
		if createMs > 0 {
			item["createMs"] = &types.AttributeValueMemberN{Value: fmt.Sprint(createMs)}
		}
		if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
		return sk
	}
	old := chunk("0000000000aa", now.Add(-11*time.Minute).UnixMilli())
	young := chunk("0000000000bb", now.UnixMilli())
	earlier := chunk("0000000000cc", 0)

	got, err := st.ListServiceExports(ctx, "prod", e.Service)
	if err != nil || len(got) != 1 || len(got[0].EndpointGroups[0].GetEndpoints()) != len(eps) {
		t.Fatalf("the export after the orphans were written: %v, %d exports", err, len(got))
	}
	exists := func(sk string) bool {
		out, err := d.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CS#prod"}, "SK": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	if exists(old) || swept != 1 {
		t.Errorf("the orphan older than 10 minutes: still stored %v, %d swept; want removed, 1 swept", exists(old), swept)
	}
	if !exists(young) || !exists(earlier) {
		t.Errorf("a young chunk (a write in flight) and one without a write time must stay: %v, %v", exists(young), exists(earlier))
	}
}

// countedStore is a DynamoDB store (dynoxide) with use1-a registered, the calls it makes
// (taken: its capacity reports since the last call) and use1-a's export of dynamo/name with
// n endpoints.
func countedStore(t *testing.T, quota store.Quota) (*dynamostore.Store, func() []string, func(name string, n int) store.Export) {
	st, taken, export, _ := countedReplicas(t, quota)
	return st, taken, export
}

// countedReplicas is countedStore and a function that returns another replica over the
// same table (its calls not counted).
func countedReplicas(t *testing.T, quota store.Quota) (*dynamostore.Store, func() []string, func(name string, n int) store.Export, func() *dynamostore.Store) {
	t.Helper()
	ctx := context.Background()
	d := harness.StartDynamoDB(t)
	table := harness.TableName(t)
	if _, err := dynamostore.CreateTable(ctx, d.Client(), table); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ops []string
	st := dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table,
		Quota: quota,
		Capacity: func(op string, _ float64) {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
		}})
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := ops
		ops = nil
		return out
	}
	now := time.Now()
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", Region: "us-east-1", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	export := func(name string, n int) store.Export {
		var eps []*registryv1.Endpoint
		for i := range n {
			eps = append(eps, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)},
				Hostname: fmt.Sprintf("replica-%05d-of-a-large-inference-pool", i), Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
		}
		return store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: store.ServiceKey{Namespace: "dynamo", Name: name},
			Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}, Endpoints: eps}},
			CreateTime:     now, UpdateTime: now}
	}
	replica := func() *dynamostore.Store {
		return dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table, Quota: quota})
	}
	return st, taken, export, replica
}

// TestDynamoDBRewriteReadsNothing: a replica's next write of an export it wrote is one
// transaction, with no read first (it remembers what its write left in the table). When
// another replica wrote the export in between, the remembered prior fails the write's
// condition: the write reads the item and applies, the create time and the cluster's usage
// stay exact (a quota of 10 endpoints: 6 of one export and 4 of another fit, one more does
// not).
func TestDynamoDBRewriteReadsNothing(t *testing.T) {
	ctx := context.Background()
	a, taken, export, replica := countedReplicas(t, store.Quota{Endpoints: 10})
	b := replica()
	first, err := a.PutExport(ctx, export("pool", 5))
	if err != nil {
		t.Fatal(err)
	}
	taken()
	if _, err := a.PutExport(ctx, export("pool", 5)); err != nil {
		t.Fatal(err)
	}
	if got := taken(); !slices.Equal(got, []string{"TransactWriteItems"}) {
		t.Errorf("a replica's rewrite of its own export: calls %v, want one TransactWriteItems", got)
	}
	if _, err := b.PutExport(ctx, export("pool", 8)); err != nil {
		t.Fatal(err)
	}
	got, err := a.PutExport(ctx, export("pool", 6))
	if err != nil {
		t.Fatalf("a write over another replica's (a stale remembered prior): %v", err)
	}
	if !got.CreateTime.Equal(first.CreateTime) {
		t.Errorf("create time %v after the stale prior, want the first write's %v", got.CreateTime, first.CreateTime)
	}
	if n := countEndpoints(t, a, "pool"); n != 6 {
		t.Errorf("pool holds %d endpoints, want the last write's 6", n)
	}
	if _, err := b.PutExport(ctx, export("other", 4)); err != nil {
		t.Errorf("4 more endpoints with 6 stored and a quota of 10: %v (the usage counted a stale prior)", err)
	}
	if _, err := a.PutExport(ctx, export("third", 1)); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Errorf("an 11th endpoint: %v, want ErrQuotaExceeded", err)
	}
}

// TestDynamoDBSyncReadsOnce: a SyncExports reads the cluster's exports once and not the
// cluster (the server read it to judge the lease; each write checks it in its
// transaction): an unchanged set costs one Query (its keys) and a GetItem per export, a
// changed one the Query of its keys and its writes. Only a cluster with nothing stored
// and nothing to write is read, to tell an unknown cluster (ErrClusterNotFound) from one
// that exports nothing.
func TestDynamoDBSyncReadsOnce(t *testing.T) {
	ctx := context.Background()
	st, taken, export := countedStore(t, store.Quota{})
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	if _, _, err := st.SyncExports(ctx, key, []store.Export{export("router", 3), export("pool", 4)}); err != nil {
		t.Fatal(err)
	}
	if got := taken(); slices.Contains(got, "GetItem") || !slices.Contains(got, "Query") {
		t.Errorf("a sync that writes: calls %v, want a Query and its writes, no GetItem", got)
	}
	if _, _, err := st.SyncExports(ctx, key, []store.Export{export("router", 3), export("pool", 4)}); err != nil {
		t.Fatal(err)
	}
	if got := taken(); !slices.Equal(got, []string{"Query", "GetItem", "GetItem"}) {
		t.Errorf("an unchanged sync: calls %v, want one Query and two GetItems", got)
	}
	if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "ghost"}, nil); !errors.Is(err, store.ErrClusterNotFound) {
		t.Errorf("an empty sync of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
	ghost := export("router", 1)
	ghost.ClusterID = "ghost"
	if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "ghost"}, []store.Export{ghost}); !errors.Is(err, store.ErrClusterNotFound) {
		t.Errorf("a sync of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
}

// TestDynamoDBQuotaRefusalCostsNoIO: an export, or a synced set, past a quota on its own is
// refused by the store before it reads or writes the table — no prior read, no chunk items
// written and deleted again — so a cluster that keeps sending one costs DynamoDB nothing.
// (The count is the store's capacity report; a write within the quota shows it counts.)
func TestDynamoDBQuotaRefusalCostsNoIO(t *testing.T) {
	ctx := context.Background()
	st, taken, export := countedStore(t, store.Quota{Endpoints: 100})
	taken()
	if _, err := st.PutExport(ctx, export("small", 10)); err != nil {
		t.Fatal(err)
	}
	if got := taken(); len(got) == 0 {
		t.Fatal("a write within the quota reported no DynamoDB call: the count below would prove nothing")
	}
	// 6,000 endpoints: past the quota of 100, and past the inline limit (chunks).
	if _, err := st.PutExport(ctx, export("big", 6000)); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Fatalf("PutExport past the quota: %v, want ErrQuotaExceeded", err)
	}
	if got := taken(); len(got) > 0 {
		t.Errorf("PutExport past the quota on its own called DynamoDB: %v", got)
	}
	if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}, []store.Export{export("small", 60), export("other", 60)}); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Fatalf("SyncExports past the quota: %v, want ErrQuotaExceeded", err)
	}
	if got := taken(); len(got) > 0 {
		t.Errorf("SyncExports past the quota called DynamoDB: %v", got)
	}
	if n := countEndpoints(t, st, "small"); n != 10 {
		t.Errorf("after the refusals, small has %d endpoints, want the 10 it had", n)
	}
}

// countEndpoints is how many endpoints the store holds in use1-a's export of dynamo/name.
func countEndpoints(t *testing.T, st store.Store, name string) int {
	t.Helper()
	exports, err := st.ListExports(context.Background(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exports {
		if e.Service.Name == name && e.ClusterID == "use1-a" {
			n := 0
			for _, g := range e.EndpointGroups {
				n += len(g.GetEndpoints())
			}
			return n
		}
	}
	return -1
}
