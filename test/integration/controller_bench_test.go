package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// BenchmarkExportEndpointChurn changes the readiness of the 1,000 endpoints of one exported
// Service (10 slices of 100) one at a time, as fast as the API server takes the updates,
// and reports how many export writes reached the registry for those 1,000 changes and how
// long after the last change the registry held the final state. The controller runs with
// its default --endpoint-batch-period (500ms).
//
//	cd test && go test -run '^$' -bench ExportEndpointChurn -benchtime 1x ./integration/
func BenchmarkExportEndpointChurn(b *testing.B) {
	ctx := context.Background()
	reg := harness.StartRegistry(b, "--store=memory")
	cl := harness.StartClusters(b, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	for _, o := range []client.Object{namespace("dynamo"), service("dynamo", "big", 80), serviceExport("dynamo", "big")} {
		if err := cl.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	var slices []*discoveryv1.EndpointSlice
	for s := range 10 {
		var ips []string
		for e := range 100 {
			ips = append(ips, fmt.Sprintf("10.1.%d.%d", s, e))
		}
		sl := slice("dynamo", "big", fmt.Sprintf("big-%02d", s), ips...)
		if err := cl.Client.Create(ctx, sl); err != nil {
			b.Fatal(err)
		}
		slices = append(slices, sl)
	}
	cl.StartController(b, "mcs-controller", "--registry-url=http://"+reg.GRPCAddr, "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=us-east-1")
	waitReadyCount(b, reg, 1000)
	for i := 0; b.Loop(); i++ {
		ready := i%2 == 1 // the first round makes every endpoint unready, the next ready again
		want := 0
		if ready {
			want = 1000
		}
		before := registryWritesB(b, reg)
		start := time.Now()
		for e := range 1000 {
			s := slices[e/100]
			s.Endpoints[e%100].Conditions.Ready = ptr.To(ready)
			if err := cl.Client.Update(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		churn := time.Since(start)
		last := time.Now()
		waitReadyCount(b, reg, want)
		b.ReportMetric(float64(registryWritesB(b, reg)-before), "registry-writes/1000-changes")
		b.ReportMetric(float64(time.Since(last).Milliseconds()), "ms-after-last-change")
		b.ReportMetric(churn.Seconds(), "s-of-churn")
	}
}

// waitReadyCount waits until the registry's export of dynamo/big has want ready endpoints.
func waitReadyCount(b *testing.B, reg *harness.Registry, want int) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, err := httpGet("http://" + reg.RESTAddr + "/v1/clustersets/prod/exports?includeEndpoints=true")
		if err == nil {
			var resp struct {
				Exports []struct {
					EndpointGroups []struct {
						Endpoints []struct {
							Conditions struct{ Ready *bool }
						}
					} `json:"endpointGroups"`
				}
			}
			if json.Unmarshal([]byte(body), &resp) == nil && len(resp.Exports) == 1 {
				n := 0
				for _, g := range resp.Exports[0].EndpointGroups {
					for _, e := range g.Endpoints {
						if e.Conditions.Ready != nil && *e.Conditions.Ready {
							n++
						}
					}
				}
				if n == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the registry never held %d ready endpoints", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func registryWritesB(b *testing.B, reg *harness.Registry) int {
	body, err := httpGet("http://" + reg.AdminAddr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "mcs_registry_requests_total{") && (strings.Contains(l, "/PutExport\"") || strings.Contains(l, "/SyncExports\"")) {
			var n int
			fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%d", &n)
			total += n
		}
	}
	return total
}
