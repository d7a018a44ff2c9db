package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestDynamoDBClusterReadsGrowWithItsOwnExports: one cluster's sync check and its list of
// exports read what that cluster holds (its keys item and its export items), not the
// clusterset's export items: with 30 more clusters of 20 exports each in the table, they
// read exactly as many units as before. When the keys are out of date — deleted (a table
// written by an earlier release), an export written or deleted without them (a replica of
// an earlier release), even with the count unchanged — the answer is still exact, and the
// keys are written again, so the next read is cheap again. An unknown cluster's sync
// leaves no item behind.
func TestDynamoDBClusterReadsGrowWithItsOwnExports(t *testing.T) {
	ctx := context.Background()
	d := harness.StartDynamoDB(t)
	table := harness.TableName(t)
	if _, err := dynamostore.CreateTable(ctx, d.Client(), table); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	units := map[string]float64{}
	var calls []string
	st := dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table,
		Capacity: func(op string, u float64) {
			mu.Lock()
			defer mu.Unlock()
			units[op] += u
			calls = append(calls, op)
		}})
	taken := func() (map[string]float64, []string) {
		mu.Lock()
		defer mu.Unlock()
		u, c := units, calls
		units, calls = map[string]float64{}, nil
		return u, c
	}
	now := time.Now()
	export := func(id, name string) store.Export {
		var eps []*registryv1.Endpoint
		for i := range 10 {
			eps = append(eps, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i)}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
		}
		return store.Export{Clusterset: "prod", ClusterID: id, Service: store.ServiceKey{Namespace: "dynamo", Name: name},
			Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}, Endpoints: eps}},
			CreateTime:     now, UpdateTime: now}
	}
	set := func(id string) []store.Export {
		var out []store.Export
		for i := range 20 {
			out = append(out, export(id, fmt.Sprintf("svc-%02d", i)))
		}
		return out
	}
	register := func(id string) {
		t.Helper()
		if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: id, LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
			t.Fatal(err)
		}
	}
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	sync := func() []store.ServiceKey {
		t.Helper()
		_, deleted, err := st.SyncExports(ctx, key, set("use1-a"))
		if err != nil {
			t.Fatal(err)
		}
		return deleted
	}
	list := func() string {
		t.Helper()
		out, bad, err := st.ListClusterExports(ctx, key)
		if err != nil || len(bad) > 0 {
			t.Fatalf("list use1-a's exports: %v, %v", bad, err)
		}
		var names []string
		for _, e := range out {
			if e.ClusterID != "use1-a" {
				t.Errorf("use1-a's list holds %s of %s", e.Service, e.ClusterID)
			}
			names = append(names, e.Service.Name)
		}
		return strings.Join(names, ",")
	}
	reads := func(u map[string]float64) float64 { return u["Query"] + u["GetItem"] }
	queries := func(c []string) int {
		n := 0
		for _, op := range c {
			if op == "Query" {
				n++
			}
		}
		return n
	}
	want := strings.Join(func() []string {
		var n []string
		for _, e := range set("use1-a") {
			n = append(n, e.Service.Name)
		}
		return n
	}(), ",")

	register("use1-a")
	sync()
	taken()
	sync()
	syncAlone, _ := taken()
	if got := list(); got != want {
		t.Fatalf("use1-a's exports: %s, want %s", got, want)
	}
	listAlone, listCalls := taken()
	if queries(listCalls) != 1 {
		t.Errorf("a list through the keys: calls %v, want one Query (the keys) and the items", listCalls)
	}

	for i := range 30 {
		id := fmt.Sprintf("other-%02d", i)
		register(id)
		if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id}, set(id)); err != nil {
			t.Fatal(err)
		}
	}
	taken()
	sync()
	syncCrowded, syncCalls := taken()
	list()
	listCrowded, _ := taken()
	if reads(syncCrowded) != reads(syncAlone) || reads(listCrowded) != reads(listAlone) {
		t.Errorf("read units of use1-a's unchanged sync: %.1f alone, %.1f beside 600 other exports; of its list: %.1f and %.1f; want them equal",
			reads(syncAlone), reads(syncCrowded), reads(listAlone), reads(listCrowded))
	}
	if queries(syncCalls) != 1 || slices.Contains(syncCalls, "TransactWriteItems") {
		t.Errorf("an unchanged sync: calls %v, want one Query (the keys), GetItems and no write", syncCalls)
	}
	t.Logf("read units: unchanged sync %.1f, list %.1f (20 exports of 10 endpoints)", reads(syncCrowded), reads(listCrowded))

	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	item := func(sk string) map[string]types.AttributeValue {
		t.Helper()
		out, err := d.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"PK": sv("CS#prod"), "SK": sv(sk)}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	put := func(it map[string]types.AttributeValue) {
		t.Helper()
		if _, err := d.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(sk string) {
		t.Helper()
		if _, err := d.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: map[string]types.AttributeValue{"PK": sv("CS#prod"), "SK": sv(sk)}}); err != nil {
			t.Fatal(err)
		}
	}
	addUsage := func(n int) {
		t.Helper()
		if _, err := d.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: map[string]types.AttributeValue{"PK": sv("CS#prod"), "SK": sv("USAGE#use1-a")},
			UpdateExpression: aws.String("ADD uX :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: fmt.Sprint(n)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// copyAs is an export item of use1-a written as another Service, as a writer that
	// keeps the usage but not the keys writes it.
	copyAs := func(name string) {
		t.Helper()
		it := item("EXPORT#dynamo/svc-01#use1-a")
		it["SK"] = sv("EXPORT#dynamo/" + name + "#use1-a")
		put(it)
	}
	settled := func(what string) {
		t.Helper()
		taken()
		list()
		if _, c := taken(); queries(c) != 1 {
			t.Errorf("after %s, the next list: calls %v, want one Query (the keys written again)", what, c)
		}
	}

	del("USAGE#use1-a#KEYS")
	if got := list(); got != want {
		t.Errorf("without the keys item: %s, want %s", got, want)
	}
	settled("a list without the keys item")

	copyAs("extra")
	addUsage(1)
	if got := list(); got != "extra,"+want {
		t.Errorf("with an export written without the keys: %s, want extra and the 20", got)
	}
	if deleted := sync(); len(deleted) != 1 || deleted[0].Name != "extra" {
		t.Errorf("the sync deleted %v, want the export written without the keys", deleted)
	}
	settled("a write without the keys")

	del("EXPORT#dynamo/svc-00#use1-a")
	copyAs("alias")
	if got, wantNow := list(), "alias,"+strings.TrimPrefix(want, "svc-00,"); got != wantNow {
		t.Errorf("with one export deleted and another written without the keys (the count unchanged): %s, want %s", got, wantNow)
	}
	settled("a delete and a write without the keys")

	if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "ghost"}, nil); err == nil {
		t.Error("an unknown cluster's sync succeeded")
	}
	for _, sk := range []string{"USAGE#ghost", "USAGE#ghost#KEYS"} {
		if it := item(sk); len(it) > 0 {
			t.Errorf("an unknown cluster's sync left %s", sk)
		}
	}
}
