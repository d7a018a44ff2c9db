package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// loadSize reads LOAD_CLUSTERS, LOAD_SERVICES, LOAD_ENDPOINTS and LOAD_WATCHES, with the
// given defaults.
func loadSize(clusters, services, endpoints, watches int) (int, int, int, int) {
	get := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	return get("LOAD_CLUSTERS", clusters), get("LOAD_SERVICES", services), get("LOAD_ENDPOINTS", endpoints), get("LOAD_WATCHES", watches)
}

// dialRaw is a connection for answers as large as a whole clusterset's snapshot, as the
// controller's client takes them.
func dialRaw(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	return dialConn(tb, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
}

// revisionOnly is a WatchImportsResponse read for its revision (field 2) and
// snapshot_continues (field 7) alone, and its size on the wire.
type revisionOnly struct {
	rev       int64
	continues bool
	size      int
}

// revisionCodec sends requests as protobuf and reads answers into a revisionOnly.
type revisionCodec struct{}

func (revisionCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (revisionCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b := data.Materialize()
	out := v.(*revisionOnly)
	out.size = len(b)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if (num == 2 || num == 7) && typ == protowire.VarintType {
			x, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if num == 2 {
				out.rev = int64(x)
			} else {
				out.continues = x != 0
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

func (revisionCodec) Name() string { return "proto" }

// BenchmarkRegistryLoad is the registry's load generator. Method: the real mcs-registry on
// the chosen store; C clusters register, then all C send SyncExports of S Services of E
// endpoints each at the same moment (every cluster exports the same Service names, as a
// fleet does); reported: the wall time of the whole load, the p50 and max latency of one
// call, the latency of a small cluster's sync of one export sent 100 ms into the load, and
// the registry's CPU seconds and RSS. Then the write rate with no watch open
// (the floor of the rate): 10 clusters (LOAD_WRITERS), each on its own connection, write
// 100 PutExports each back to back, all at once, each changing one endpoint of its own
// Service. Then W watches with endpoints open at once: the time until every one has its
// snapshot, and the RSS. Then 200 PutExports, one at a time, with the W watches following:
// the p50 and p99 time until every watch has the change, and the floor of the same run
// (the PutExport's own round trip, p50). Then the writers' burst again, until every watch
// has its last write: the writes per second followed, and its ratio to the floor; and the
// bytes of one change's message and the bytes each watch was sent per write. With the DynamoDB store, the floor of the load is
// measured first: DynamoDB's own time to store the same items (dynamoLoadFloor). The watches ask what the controller asks: cluster deltas, snapshots in pages of
// 256 imports (LOAD_WATCH=whole: whole imports in one snapshot message, the older form).
//
//	cd test && go test -run '^$' -bench 'RegistryLoad/memory' -benchtime 1x -timeout 30m ./integration/
//	LOAD_CLUSTERS=100 LOAD_SERVICES=1000 LOAD_ENDPOINTS=10 LOAD_WATCHES=100 (the default for memory);
//	LOAD_REGISTRY_LOG=<file> keeps the registry log; LOAD_WATCH=whole watches whole imports.
//	cd test && go test -run '^$' -bench 'RegistryLoad/dynamodb' -benchtime 1x ./integration/  (10 × 100 × 10)
func BenchmarkRegistryLoad(b *testing.B) {
	for _, tc := range []struct {
		store                                string
		clusters, services, endpoints, watch int
	}{
		{"memory", 100, 1000, 10, 100},
		{"memory-small", 10, 100, 10, 10},
		{"dynamodb", 10, 100, 10, 10},
	} {
		b.Run(tc.store, func(b *testing.B) {
			clusters, services, perExport, watches := loadSize(tc.clusters, tc.services, tc.endpoints, tc.watch)
			var reg *harness.Registry
			var floor storeFloors
			if tc.store == "dynamodb" {
				d := harness.StartDynamoDB(b)
				table := newTable(b, d)
				floor.load = func(reqs []*registryv1.SyncExportsRequest) time.Duration { return dynamoLoadFloor(b, d, table, reqs) }
				floor.writes = func(writers, n int) float64 { return dynamoWriteFloor(b, d, table, writers, n) }
				b.Setenv("AWS_ACCESS_KEY_ID", harness.DynamoDBAccessKey)
				b.Setenv("AWS_SECRET_ACCESS_KEY", harness.DynamoDBSecretKey)
				reg = harness.StartRegistry(b, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint, "--max-request-bytes=67108864")
			} else {
				reg = harness.StartRegistry(b, "--store=memory", "--max-request-bytes=67108864")
			}
			for b.Loop() {
				runLoad(b, reg, clusters, services, perExport, watches, floor)
			}
		})
	}
}

// storeFloors measure the store's own time for what the load writes; nil: not measured.
type storeFloors struct {
	// load is the store's time for the load's exports.
	load func([]*registryv1.SyncExportsRequest) time.Duration
	// writes is the store's items a second for the write burst's items.
	writes func(writers, n int) float64
}

// runLoad runs the load; storeFloor measures the store's own time for the load's exports,
// before the load, and for the write burst's items, before the burst.
func runLoad(b *testing.B, reg *harness.Registry, clusters, services, perExport, watches int, storeFloor storeFloors) {
	ctx := context.Background()
	c := dial(b, reg.GRPCAddr)
	reqs := make([]*registryv1.SyncExportsRequest, clusters)
	for i := range clusters {
		id := fmt.Sprintf("load-%03d", i)
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: id}
		for s := range services {
			ips := make([]string, perExport)
			for e := range ips {
				ips[e] = fmt.Sprintf("10.%d.%d.%d", i, s%256, e)
			}
			req.Exports = append(req.Exports, &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("pool-%04d", s)},
				Spec: relaySpec(80), EndpointGroups: endpoints(ips...)})
		}
		reqs[i] = req
	}
	var floorLoad time.Duration
	if storeFloor.load != nil {
		floorLoad = storeFloor.load(reqs)
	}
	// A small cluster that syncs one export while the load runs: how long a call waits for
	// the others'.
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "small", LeaseDuration: durationpb.New(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	small := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "small", Exports: []*registryv1.ExportContent{{
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "small"}, Spec: relaySpec(80), EndpointGroups: endpoints("10.255.0.1")}}}
	var smallLat time.Duration
	cpu0 := harness.ReadProcStat(reg.Pid()).CPUSeconds
	lat := make([]time.Duration, clusters)
	var wg sync.WaitGroup
	start := time.Now()
	var smallDone sync.WaitGroup
	smallDone.Add(1)
	go func() {
		defer smallDone.Done()
		time.Sleep(100 * time.Millisecond) // the load under way
		t := time.Now()
		if _, err := c.SyncExports(ctx, small); err != nil {
			b.Error(err)
		}
		smallLat = time.Since(t)
	}()
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			if _, err := c.SyncExports(ctx, req); err != nil {
				b.Error(err)
			}
			lat[i] = time.Since(t)
		}()
	}
	wg.Wait()
	load := time.Since(start)
	smallDone.Wait()
	slices.Sort(lat)
	b.ReportMetric(load.Seconds(), "s-load")
	if floorLoad > 0 {
		b.ReportMetric(floorLoad.Seconds(), "s-load-floor")
		b.ReportMetric(load.Seconds()/floorLoad.Seconds(), "x-load-of-floor")
	}
	b.ReportMetric(lat[len(lat)/2].Seconds(), "s-call-p50")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "s-call-max")
	b.ReportMetric(smallLat.Seconds(), "s-small-call-during-load")
	b.ReportMetric(harness.ReadProcStat(reg.Pid()).CPUSeconds-cpu0, "s-cpu-load")
	b.ReportMetric(harness.ReadProcStat(reg.Pid()).RSSMiB, "MiB-rss-load")

	// The floor of the write rate: the same burst with no watch open, once the registry
	// has settled from the load (its collector still runs for a while).
	time.Sleep(2 * time.Second)
	writers, burst := make([]registryv1.RegistryServiceClient, min(loadWriters(), clusters)), 100
	for i := range writers {
		writers[i] = dial(b, reg.GRPCAddr) // a connection each, as clusters have
	}
	if storeFloor.writes != nil {
		b.ReportMetric(storeFloor.writes(len(writers), burst), "writes/s-store-floor")
	}
	start = time.Now()
	writeBurst(b, writers, burst)
	unwatched := float64(len(writers)*burst) / time.Since(start).Seconds()
	b.ReportMetric(unwatched, "writes/s-floor")

	// W watches with endpoints; each reports when it has its snapshot, then how far it got.
	type watchState struct {
		mu  sync.Mutex
		rev int64
		at  time.Time
		// messages and bytes after the snapshot
		messages, bytes int
	}
	req := &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true, ClusterDeltas: true, SnapshotPageSize: 256}
	if os.Getenv("LOAD_WATCH") == "whole" {
		req = &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true}
	}
	states := make([]*watchState, watches)
	snapshots := make(chan struct{}, watches)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	start = time.Now()
	for i := range watches {
		st := &watchState{}
		states[i] = st
		conn := dialRaw(b, reg.GRPCAddr) // a connection each, as controllers have
		go func() {
			// The watch's messages are read for their revision alone: decoding 100
			// snapshots of a million endpoints would take the test process, not the
			// registry, to many GiB.
			stream, err := conn.NewStream(wctx, &grpc.StreamDesc{ServerStreams: true}, "/globaldiscoverymcs.registry.v1.RegistryService/WatchImports", grpc.ForceCodecV2(revisionCodec{}))
			if err == nil {
				err = stream.SendMsg(req)
			}
			if err == nil {
				err = stream.CloseSend()
			}
			if err != nil {
				b.Error(err)
				snapshots <- struct{}{}
				return
			}
			first := true
			for {
				var rev revisionOnly
				if err := stream.RecvMsg(&rev); err != nil {
					if first && wctx.Err() == nil {
						b.Error(err)
						snapshots <- struct{}{}
					}
					return
				}
				if rev.continues {
					continue // a page of the snapshot: the watch has it at the last page
				}
				st.mu.Lock()
				st.rev, st.at = rev.rev, time.Now()
				if !first {
					st.messages++
					st.bytes += rev.size
				}
				st.mu.Unlock()
				if first {
					first = false
					snapshots <- struct{}{}
				}
			}
		}()
	}
	for range watches {
		<-snapshots
	}
	b.ReportMetric(time.Since(start).Seconds(), "s-all-snapshots")
	b.ReportMetric(harness.ReadProcStat(reg.Pid()).RSSMiB, "MiB-rss-watches")

	// One write at a time, followed by every watch.
	var follow, floor []time.Duration
	for i := range 200 {
		t := time.Now()
		resp, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "load-000",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "pool-0000"}, Spec: relaySpec(80),
			EndpointGroups: endpoints(fmt.Sprintf("10.0.0.%d", i%250), "10.0.1.1")})
		if err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t))
		_ = resp
		// The revision after the write: ListImports answers from the same cache.
		list, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod", Namespace: "none"})
		if err != nil {
			b.Fatal(err)
		}
		rev := list.GetRevision()
		deadline := time.Now().Add(time.Minute)
		var last time.Time
		for _, st := range states {
			for {
				st.mu.Lock()
				r, at := st.rev, st.at
				st.mu.Unlock()
				if r >= rev {
					if at.After(last) {
						last = at
					}
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("a watch did not reach revision %d", rev)
				}
				time.Sleep(200 * time.Microsecond)
			}
		}
		follow = append(follow, last.Sub(t))
	}
	slices.Sort(follow)
	slices.Sort(floor)
	b.ReportMetric(float64(follow[len(follow)/2].Microseconds())/1000, "ms-write-to-all-watches-p50")
	b.ReportMetric(float64(follow[len(follow)*99/100].Microseconds())/1000, "ms-write-to-all-watches-p99")
	b.ReportMetric(float64(floor[len(floor)/2].Microseconds())/1000, "ms-floor-put-p50")

	// Throughput: the writers' writes back to back, until every watch has the last one.
	start = time.Now()
	writeBurst(b, writers, burst)
	list, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod", Namespace: "none"})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range states {
		for {
			st.mu.Lock()
			r := st.rev
			st.mu.Unlock()
			if r >= list.GetRevision() {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	followed := float64(len(writers)*burst) / time.Since(start).Seconds()
	b.ReportMetric(followed, "writes/s-followed")
	b.ReportMetric(followed/unwatched, "x-writes/s-of-floor")
	var messages, bytes int
	for _, st := range states {
		st.mu.Lock()
		messages, bytes = messages+st.messages, bytes+st.bytes
		st.mu.Unlock()
	}
	if messages > 0 {
		// A message may carry several writes (the burst's writes that land in one batch),
		// so its size alone does not tell the cost: the bytes each watch was sent per write.
		b.ReportMetric(float64(bytes)/float64(messages), "bytes/change-message")
		b.ReportMetric(float64(bytes)/float64(len(states))/float64(200+len(writers)*burst), "bytes/write-per-watch")
	}
	stop()
	if os.Getenv("LOAD_REGISTRY_LOG") != "" {
		_ = os.WriteFile(os.Getenv("LOAD_REGISTRY_LOG"), []byte(reg.Output()), 0o644) // the registry log, for a closer look
	}
}

// loadWriters reads LOAD_WRITERS: how many clusters write at once in the throughput
// phases (default 10; a fleet's clusters write independently of each other).
func loadWriters() int {
	if v, err := strconv.Atoi(os.Getenv("LOAD_WRITERS")); err == nil && v > 0 {
		return v
	}
	return 10
}

// writeBurst has one cluster per writer (load-000…) write n PutExports back to back, each
// changing one endpoint of its own Service, all writers at once.
func writeBurst(b *testing.B, writers []registryv1.RegistryServiceClient, n int) {
	var wg sync.WaitGroup
	for w, c := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := c.PutExport(context.Background(), &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: fmt.Sprintf("load-%03d", w),
					Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("pool-%04d", w)}, Spec: relaySpec(80),
					EndpointGroups: endpoints(fmt.Sprintf("10.%d.2.%d", w, i%250), "10.0.1.1")}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
