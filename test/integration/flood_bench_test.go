package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// BenchmarkFlood measures what one flooding client costs a bystander cluster. Method: the
// real mcs-registry (memory store, the default --client-rate and --client-burst, each
// cluster allowed one export). A bystander cluster, in this process on 127.0.0.1, watches
// the clusterset and writes its export 400 times, one at a time, 12 ms apart (within its
// share), each with a new endpoint; a write's latency is from its call to the watch message that carries it. The
// flood is test/cmd/flood in its own process on 127.0.0.2: a cluster at its export quota
// sending a PutExport of a new Service with 200 KiB of annotations (refused by its quota
// when admitted) as fast as it can, 4 connections × 4 calls in flight. Measured three
// kinds of times in one run: quiet (no flood); the floor (the same flood process sending the same
// requests to a listener in this process that refuses each at its door, so the flood's own
// CPU on the shared cores is in the floor); and the flood against the registry — the floor
// and the flood twice each, in turn, their samples pooled. Reported:
// the bystander's p50 and p99 in each, the flood's calls a second and those admitted, the
// registry's CPU seconds a second under the floor (the bystander's own) and under the
// flood, and p99 under the flood over p99 under the floor (the target: ≤ 1.5).
//
//	cd test && go test -run '^$' -bench Flood -benchtime 1x ./integration/
func BenchmarkFlood(b *testing.B) {
	flood := filepath.Join(b.TempDir(), "flood")
	if out, err := exec.Command("go", "build", "-o", flood, "../cmd/flood").CombinedOutput(); err != nil {
		b.Fatalf("build the flood: %v\n%s", err, out)
	}
	reg := harness.StartRegistry(b, "--store=memory", "--max-exports-per-cluster=1", "--client-rate=200", "--client-burst=2000")
	floorAddr := refusingListener(b)
	ctx := context.Background()
	c := dial(b, reg.GRPCAddr)
	for _, id := range []string{"calm", "flood"} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: id, Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: id},
			Spec: relaySpec(80), EndpointGroups: endpoints("10.0.0.1")}); err != nil {
			b.Fatal(err)
		}
	}
	w := watchRevisions(b, reg.GRPCAddr)
	for b.Loop() {
		// The floor and the flood twice each, in turn, so a drift of the machine falls on both.
		quiet := bystanderWrites(b, c, w)
		var floorLat, floodLat []time.Duration
		var floorFlood, floodFlood floodResult
		var floorCPU, floodCPU float64
		for range 2 {
			lat, r, cpu := underFlood(b, flood, floorAddr, reg, c, w)
			floorLat, floorFlood, floorCPU = append(floorLat, lat...), floorFlood.add(r), floorCPU+cpu/2
			lat, r, cpu = underFlood(b, flood, reg.GRPCAddr, reg, c, w)
			floodLat, floodFlood, floodCPU = append(floodLat, lat...), floodFlood.add(r), floodCPU+cpu/2
		}
		slices.Sort(floorLat)
		slices.Sort(floodLat)
		for _, r := range []struct {
			name string
			lat  []time.Duration
		}{{"quiet", quiet}, {"floor", floorLat}, {"flood", floodLat}} {
			b.ReportMetric(ms(r.lat[len(r.lat)/2]), "ms-p50-"+r.name)
			b.ReportMetric(ms(r.lat[len(r.lat)*99/100]), "ms-p99-"+r.name)
		}
		b.ReportMetric(ms(floodLat[len(floodLat)*99/100])/ms(floorLat[len(floorLat)*99/100]), "x-p99-flood-over-floor")
		b.ReportMetric(float64(floorFlood.Sent)/floorFlood.Seconds, "flood-calls/s-floor")
		b.ReportMetric(float64(floodFlood.Sent)/floodFlood.Seconds, "flood-calls/s")
		admitted := floodFlood.Sent - floodFlood.Codes[codes.ResourceExhausted.String()] + floodFlood.refusedByQuota
		b.ReportMetric(float64(admitted)/floodFlood.Seconds, "flood-admitted/s")
		b.ReportMetric(floorCPU, "registry-cpu-s/s-floor")
		b.ReportMetric(floodCPU, "registry-cpu-s/s-flood")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// floodResult is test/cmd/flood's output.
type floodResult struct {
	Seconds float64
	Sent    int64
	Codes   map[string]int64
	// refusedByQuota: the RESOURCE_EXHAUSTED answers that were the quota's, not the door's
	// (the registry's count of door refusals tells them apart).
	refusedByQuota int64
}

// add sums two runs of the flood.
func (r floodResult) add(o floodResult) floodResult {
	codes := map[string]int64{}
	for _, m := range []map[string]int64{r.Codes, o.Codes} {
		for c, n := range m {
			codes[c] += n
		}
	}
	return floodResult{Seconds: r.Seconds + o.Seconds, Sent: r.Sent + o.Sent, Codes: codes, refusedByQuota: r.refusedByQuota + o.refusedByQuota}
}

// underFlood runs the flood against target while the bystander writes; it returns the
// bystander's latencies, what the flood did, and the registry's CPU seconds a second.
func underFlood(b *testing.B, flood, target string, reg *harness.Registry, c registryv1.RegistryServiceClient, w *revisions) ([]time.Duration, floodResult, float64) {
	b.Helper()
	var out bytes.Buffer
	cmd := exec.Command(flood, "--target", target, "--from", "127.0.0.2")
	cmd.Stdout, cmd.Stderr = &out, &out
	doorBefore := metric(b, reg, `mcs_registry_client_throttled_total{client="address 127.0.0.2"}`)
	cpuBefore, start := harness.ReadProcStat(reg.Pid()).CPUSeconds, time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // the flood at full speed
	lat := bystanderWrites(b, c, w)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("flood: %v\n%s", err, out.String())
	}
	cpu := (harness.ReadProcStat(reg.Pid()).CPUSeconds - cpuBefore) / time.Since(start).Seconds()
	var r floodResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		b.Fatalf("flood output: %v\n%s", err, out.String())
	}
	if target == reg.GRPCAddr {
		door := int64(metric(b, reg, `mcs_registry_client_throttled_total{client="address 127.0.0.2"}`) - doorBefore)
		r.refusedByQuota = r.Codes[codes.ResourceExhausted.String()] - door
	}
	return lat, r, cpu
}

// bystanderWrites writes the calm cluster's export 400 times, 12 ms apart, and returns the
// sorted times from each call until the watch has its revision. With the ListImports that
// reads each write's revision, that is 167 small calls a second: within the bystander's
// own share (--client-rate 200).
func bystanderWrites(b *testing.B, c registryv1.RegistryServiceClient, w *revisions) []time.Duration {
	b.Helper()
	ctx := context.Background()
	var lat []time.Duration
	for i := range 400 {
		time.Sleep(12 * time.Millisecond)
		t := time.Now()
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "calm", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "calm"},
			Spec: relaySpec(80), EndpointGroups: endpoints(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))}); err != nil {
			b.Fatal(err)
		}
		list, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod", Namespace: "none"})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, w.wait(b, list.GetRevision()).Sub(t))
	}
	slices.Sort(lat)
	return lat
}

// revisions follows one watch: when it received each revision.
type revisions struct {
	mu   sync.Mutex
	seen map[int64]time.Time
	last int64
}

func watchRevisions(b *testing.B, addr string) *revisions {
	b.Helper()
	w := &revisions{seen: map[int64]time.Time{}}
	conn := dialRaw(b, addr)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/globaldiscoverymcs.registry.v1.RegistryService/WatchImports", grpc.ForceCodecV2(revisionCodec{}))
	if err == nil {
		err = stream.SendMsg(&registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true, ClusterDeltas: true})
	}
	if err == nil {
		err = stream.CloseSend()
	}
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			var m revisionOnly
			if err := stream.RecvMsg(&m); err != nil {
				return
			}
			w.mu.Lock()
			if m.rev > w.last {
				// Every revision up to this one is in the watch now.
				for r := w.last + 1; r <= m.rev; r++ {
					w.seen[r] = time.Now()
				}
				w.last = m.rev
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// wait returns when the watch received revision rev.
func (w *revisions) wait(b *testing.B, rev int64) time.Time {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		at, ok := w.seen[rev]
		w.mu.Unlock()
		if ok {
			return at
		}
		time.Sleep(100 * time.Microsecond)
	}
	b.Fatalf("the watch did not reach revision %d", rev)
	return time.Time{}
}

// refusingListener is the floor's listener: it refuses every call at its door, as the
// registry refuses a client over its share, and returns its address.
func refusingListener(b *testing.B) string {
	b.Helper()
	st, err := status.New(codes.ResourceExhausted, "refused at once").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpc.InTapHandle(func(context.Context, *tap.Info) (context.Context, error) { return nil, st.Err() }))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}
