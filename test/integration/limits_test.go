package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// startRegistryOn starts the real registry on the named store (memory, or dynamodb on a
// fresh table of a new dynoxide) with extra flags.
func startRegistryOn(t *testing.T, storeName string, extra ...string) *harness.Registry {
	t.Helper()
	if storeName == "memory" {
		return harness.StartRegistry(t, append([]string{"--store=memory"}, extra...)...)
	}
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	return harness.StartRegistry(t, append([]string{"--store=dynamodb", "--dynamodb-table=" + table, "--region=" + d.Region, "--endpoint-url=" + d.Endpoint}, extra...)...)
}

// metric sums the values of the registry's metric lines that start with prefix.
func metric(t testing.TB, reg *harness.Registry, prefix string) float64 {
	t.Helper()
	_, body, err := harness.Get("http://" + reg.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

func manyEndpoints(n int) []*registryv1.EndpointGroup {
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	return endpoints(ips...)
}

// TestPerClusterQuotas: a cluster cannot hold more exports, or endpoints in all, than the
// per-cluster limits; a write past one is RESOURCE_EXHAUSTED naming the flag, and nothing
// stored changes. Both stores.
func TestPerClusterQuotas(t *testing.T) {
	for _, storeName := range []string{"memory", "dynamodb"} {
		t.Run(storeName, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			reg := startRegistryOn(t, storeName, "--max-exports-per-cluster=3", "--max-endpoints-per-cluster=100")
			c := dial(t, reg.GRPCAddr)
			for _, id := range []string{"a", "b"} {
				if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Minute)}); err != nil {
					t.Fatal(err)
				}
			}
			put := func(id, name string, n int) error {
				_, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: id,
					Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name}, Spec: relaySpec(80), EndpointGroups: manyEndpoints(n)})
				return err
			}
			for i := range 3 {
				if err := put("a", fmt.Sprintf("svc%d", i), 30); err != nil {
					t.Fatalf("export %d: %v", i, err)
				}
			}
			exhausted := func(what string, err error, flag string) {
				t.Helper()
				if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), flag) {
					t.Errorf("%s: %v; want RESOURCE_EXHAUSTED naming %s", what, err, flag)
				}
			}
			exhausted("a fourth export", put("a", "svc3", 1), "--max-exports-per-cluster")
			exhausted("more endpoints than the cluster may hold", put("a", "svc0", 41), "--max-endpoints-per-cluster")
			if err := put("a", "svc0", 40); err != nil {
				t.Errorf("replacing an export within the limits: %v", err)
			}
			// Another cluster has its own quota.
			if err := put("b", "svc3", 100); err != nil {
				t.Errorf("another cluster's export: %v", err)
			}
			four := make([]*registryv1.ExportContent, 4)
			for i := range four {
				four[i] = &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc%d", i)}, Spec: relaySpec(80)}
			}
			_, err := c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "a", Exports: four})
			exhausted("a sync of four exports", err, "--max-exports-per-cluster")

			list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a", IncludeEndpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, e := range list.GetExports() {
				for _, g := range e.GetEndpointGroups() {
					total += len(g.GetEndpoints())
				}
			}
			if len(list.GetExports()) != 3 || total != 100 {
				t.Fatalf("cluster a holds %d exports, %d endpoints; want 3 and 100 (the refusals changed what was stored)", len(list.GetExports()), total)
			}
			if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="exports_per_cluster"}`); n != 2 {
				t.Errorf("exports_per_cluster refusals = %v, want 2", n)
			}
			if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="endpoints_per_cluster"}`); n != 1 {
				t.Errorf("endpoints_per_cluster refusals = %v, want 1", n)
			}
		})
	}
}

// TestSyncCostFollowsCaller: a cluster's SyncExports merges again only the Services it
// changes, whatever the size of the clusterset (it used to reload and merge the whole
// clusterset on every sync).
func TestSyncCostFollowsCaller(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	const clusters, services = 20, 25
	sync := func(id string, port int32) {
		t.Helper()
		exports := make([]*registryv1.ExportContent, services)
		for i := range exports {
			exports[i] = &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("%s-svc%d", id, i)},
				Spec: relaySpec(port), EndpointGroups: endpoints("10.0.0.1")}
		}
		if _, err := c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: id, Exports: exports}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range clusters {
		id := fmt.Sprintf("c%02d", i)
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		sync(id, 80)
	}
	time.Sleep(500 * time.Millisecond) // the change feed's echoes of the syncs
	before := metric(t, reg, "mcs_registry_import_recomputes_total")
	sync("c00", 81)
	time.Sleep(500 * time.Millisecond)
	merges := metric(t, reg, "mcs_registry_import_recomputes_total") - before
	t.Logf("one cluster's sync of %d exports in a clusterset of %d: %v merges", services, clusters*services, merges)
	if merges > 2*services {
		t.Fatalf("one cluster's sync of %d exports merged %v imports; want at most %d (its own Services)", services, merges, 2*services)
	}
}

// TestBytesPerCluster: --max-bytes-per-cluster bounds what one cluster stores in bytes
// (within the count quotas, 1,000 exports × 250 KiB of annotations once took 245 MiB): a
// write past it is RESOURCE_EXHAUSTED naming the flag and changes nothing, another cluster
// writes on; and a watch whose snapshot is larger than gRPC's default 4 MiB receive limit
// (8 MB here), asking no pages, gets it in pages a default client accepts.
func TestBytesPerCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--max-bytes-per-cluster=4194304")
	c := dial(t, reg.GRPCAddr) // gRPC's default limits: 4 MiB per received message
	blob := strings.Repeat("x", 250_000)
	put := func(cluster string, i int) error {
		spec := relaySpec(80)
		spec.ExportedAnnotations = map[string]string{"example.com/blob": blob}
		_, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: cluster,
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("%s-blob%02d", cluster, i)}, Spec: spec})
		return err
	}
	for _, cluster := range []string{"heavy", "other"} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: cluster}); err != nil {
			t.Fatal(err)
		}
		for i := range 16 { // 16 × 250 kB: 4.0 MB, within 4 MiB
			if err := put(cluster, i); err != nil {
				t.Fatalf("%s's export %d within the budget: %v", cluster, i, err)
			}
		}
	}
	err := put("heavy", 16)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-bytes-per-cluster") {
		t.Fatalf("the write past the budget: %v; want RESOURCE_EXHAUSTED naming --max-bytes-per-cluster", err)
	}
	if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="bytes_per_cluster"}`); n != 1 {
		t.Errorf("bytes_per_cluster refusals = %v, want 1", n)
	}
	list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "heavy"})
	if err != nil || len(list.GetExports()) != 16 {
		t.Fatalf("heavy's exports after the refusal: %d, %v; want 16", len(list.GetExports()), err)
	}
	// Replacing an export with one of the same size is no growth: allowed.
	if err := put("heavy", 3); err != nil {
		t.Fatalf("rewriting an export at the budget: %v", err)
	}
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	got, pages := 0, 0
	for {
		m, err := w.Recv()
		if err != nil {
			t.Fatalf("the snapshot, page %d, to a client with gRPC's default limits: %v", pages, err)
		}
		pages++
		got += len(m.GetUpserts())
		if !m.GetSnapshotContinues() {
			break
		}
	}
	if got != 32 || pages < 2 {
		t.Fatalf("snapshot: %d imports in %d messages; want 32 in several", got, pages)
	}
	t.Logf("an 8 MB snapshot came in %d messages", pages)
}

// TestQuotaAcrossReplicas: with two DynamoDB-store replicas over one table, a cluster's
// writes through both at once, or alternating one at a time, never leave it more than
// --max-exports-per-cluster (each replica once checked its own cache: 38 and 32 of 20);
// the refusal names the flag. A table written before usage was kept (no usage item) is
// counted on the next write.
func TestQuotaAcrossReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	start := func() registryv1.RegistryServiceClient {
		reg := harness.StartRegistry(t, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint, "--max-exports-per-cluster=20")
		return dial(t, reg.GRPCAddr)
	}
	replicas := []registryv1.RegistryServiceClient{start(), start()}
	if _, err := replicas[0].RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a", LeaseDuration: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	put := func(c registryv1.RegistryServiceClient, name string) error {
		_, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name}, Spec: relaySpec(80)})
		return err
	}
	held := func() int {
		list, err := replicas[1].ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.GetExports())
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = put(replicas[i%2], fmt.Sprintf("c%02d", i))
		}()
	}
	wg.Wait()
	if n := held(); n > 20 {
		t.Fatalf("40 concurrent writes through two replicas left %d exports; at most 20", n)
	}
	for i := 0; held() < 20; i++ {
		if err := put(replicas[i%2], fmt.Sprintf("s%02d", i)); err != nil {
			t.Fatalf("a write within the quota: %v", err)
		}
	}
	for i := range 4 {
		err := put(replicas[i%2], fmt.Sprintf("over%d", i))
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-exports-per-cluster") {
			t.Fatalf("write %d past the quota through replica %d: %v; want RESOURCE_EXHAUSTED naming --max-exports-per-cluster", i, i%2, err)
		}
	}
	// As a table written before usage was kept: the usage item removed.
	if _, err := d.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: map[string]ddbtypes.AttributeValue{
		"PK": &ddbtypes.AttributeValueMemberS{Value: "CS#prod"}, "SK": &ddbtypes.AttributeValueMemberS{Value: "USAGE#a"}}}); err != nil {
		t.Fatal(err)
	}
	list, err := replicas[0].ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"})
	if err != nil || len(list.GetExports()) == 0 {
		t.Fatalf("list: %v", err)
	}
	if r, err := replicas[0].DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: list.GetExports()[0].GetService()}); err != nil || !r.GetDeleted() {
		t.Fatalf("delete one export: %v %v", r, err)
	}
	if err := put(replicas[1], "recounted"); err != nil {
		t.Fatalf("a write after the usage was counted again: %v", err)
	}
	if err := put(replicas[0], "over-again"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a write past the quota after the usage was counted again: %v", err)
	}
	if n := held(); n != 20 {
		t.Fatalf("cluster a holds %d exports, want 20", n)
	}
}
