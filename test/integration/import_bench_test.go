package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// BenchmarkImportScale: three clusters export 1,000 Services with 10 endpoints each (sent
// straight to the real registry), and one real mcs-controller imports them into a real
// kube-apiserver: 1,000 ServiceImports, 1,000 derived Services, 3,000 EndpointSlices. It
// reports the time from the controller's start until every import is in the cluster, the
// API writes it made and their rate, the controller's RSS, and the API writes of a
// restarted controller with nothing changed. The floor of the same run, measured first:
// the same writes made by a plain client with the controller's concurrency
// (--import-workers, 8) and client settings (importFloor); reported as its rate and the
// controller's rate as a share of it.
//
//	cd test && go test -run '^$' -bench ImportScale -benchtime 1x -timeout 30m ./integration/
func BenchmarkImportScale(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cl := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"importer"}})[0]
	if err := cl.Client.Create(ctx, namespace("dynamo")); err != nil {
		b.Fatal(err)
	}
	conn := dial(b, reg.GRPCAddr)
	const services = 1000
	for c := range 3 {
		id := fmt.Sprintf("exporter-%d", c)
		if _, err := conn.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: id}
		for s := range services {
			g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
			for e := range 10 {
				g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", c, s/100, (s%100)*2+e)}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}, TargetPod: fmt.Sprintf("pod-%d", e)})
			}
			req.Exports = append(req.Exports, &registryv1.ExportContent{
				Service:        &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%04d", s)},
				Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
				EndpointGroups: []*registryv1.EndpointGroup{g},
			})
		}
		if _, err := conn.SyncExports(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	floorWrites, floorTime := importFloor(b, cl, "floor", services, 3, 10, 8)
	floorRate := float64(floorWrites) / floorTime.Seconds()
	for b.Loop() {
		b.ReportMetric(floorRate, "writes/s-floor") // inside the loop: b.Loop resets what came before
		start := time.Now()
		ctl := cl.StartController(b, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
			"--clusterset-id=prod", "--cluster-id=importer", "--region=r")
		waitCount(b, ctl.MetricsAddr, `mcs_controller_import_writes_total{kind="EndpointSlice",op="create"}`, 3*services)
		waitCount(b, ctl.MetricsAddr, `mcs_controller_import_writes_total{kind="ServiceImport",op="update"}`, 2*services) // spec.ips + status
		took := time.Since(start)
		b.ReportMetric(took.Seconds(), "s-to-converge")
		writes := harness.MetricSum(harness.Scrape(b, "http://"+ctl.MetricsAddr+"/metrics"), "mcs_controller_import_writes_total", nil)
		b.ReportMetric(writes, "writes")
		b.ReportMetric(writes/took.Seconds(), "writes/s")
		b.ReportMetric(writes/took.Seconds()/floorRate, "x-writes/s-of-floor")
		b.ReportMetric(harness.ReadProcStat(ctl.Pid()).RSSMiB, "controller-RSS-MiB")
		ctl.Stop(10 * time.Second)

		restarted := cl.StartController(b, "mcs-controller-restarted", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
			"--clusterset-id=prod", "--cluster-id=importer", "--region=r")
		for !strings.Contains(restarted.Output(), `"msg":"import resync"`) {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(15 * time.Second) // every key reconciled at least once
		writes = harness.MetricSum(harness.Scrape(b, "http://"+restarted.MetricsAddr+"/metrics"), "mcs_controller_import_writes_total", nil)
		b.ReportMetric(writes, "writes-on-no-change-resync")
		restarted.Stop(10 * time.Second)
	}
}

func waitCount(b *testing.B, addr, metric string, want int) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if _, body, err := harness.Get("http://" + addr + "/metrics"); err == nil {
			if v, err := harness.MetricIn(body, metric); err == nil && v >= float64(want) {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never reached %d", metric, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
