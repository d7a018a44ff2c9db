package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestHealthFollowsStore: the registry's gRPC health (what a controller's failback probe
// asks) says NOT_SERVING while its DynamoDB endpoint does not answer and SERVING again
// when it does, for the server ("") and the registry service alike, as /readyz does.
func TestHealthFollowsStore(t *testing.T) {
	d := harness.StartDynamoDB(t)
	table := newTable(t, d)
	fw := harness.Forward(t, strings.TrimPrefix(d.Endpoint, "http://"))
	reg := dynamoRegistry(t, &harness.DynamoDB{Endpoint: "http://" + fw.Addr, Region: d.Region}, table)
	conn := dialConn(t, reg.GRPCAddr)
	hc := healthpb.NewHealthClient(conn)
	status := func() string {
		var out []string
		for _, svc := range []string{"", "globaldiscoverymcs.registry.v1.RegistryService"} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			cancel()
			if err != nil {
				out = append(out, err.Error())
			} else {
				out = append(out, resp.GetStatus().String())
			}
		}
		code, _ := get(t, "http://"+reg.AdminAddr+"/readyz")
		up := harness.Metric(t, "http://"+reg.AdminAddr+"/metrics", "mcs_registry_store_up")
		return strings.Join(out, " ") + " readyz=" + map[bool]string{true: "200", false: "503"}[code == 200] + fmt.Sprintf(" store_up=%g", up)
	}
	want := func(what, s string) {
		harness.Eventually(t, what, 30*time.Second, func() string {
			if got := status(); got != s {
				return got
			}
			return ""
		})
	}
	want("serving", "SERVING SERVING readyz=200 store_up=1")
	fw.SetDown(true)
	want("not serving while DynamoDB is unreachable", "NOT_SERVING NOT_SERVING readyz=503 store_up=0")
	// The heartbeats that fail meanwhile, which no request waits for, are counted and
	// logged, not dropped in silence.
	harness.Eventually(t, "the failed heartbeats counted and logged", 30*time.Second, func() string {
		n := harness.Metric(t, "http://"+reg.AdminAddr+"/metrics", `mcs_registry_store_dropped_writes_total{op="heartbeat"}`)
		if n < 1 || !strings.Contains(grepLines(reg.Output(), `msg="a store write that no request waits for failed"`), " op=heartbeat failures=1 ") {
			return fmt.Sprintf("%g dropped heartbeats counted; log:\n%s", n, grepLines(reg.Output(), "no request waits for"))
		}
		return ""
	})
	fw.SetDown(false)
	want("serving again", "SERVING SERVING readyz=200 store_up=1")
}
