package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestServersLogOnlyJSON: with --log-format=json, every line the registry, the controller
// and the Global Discovery Service print is a JSON object — klog's (client-go, leader
// election) and a deprecated flag's warning included — from start-up, through work, to
// shutdown.
func TestServersLogOnlyJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--log-format=json")
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo")
	// --metrics-bind-address: the earlier name of --metrics-addr, which must warn in JSON.
	ctl := cl.StartController(t, "mcs-controller/use1-a", controllerArgs(reg, "use1-a", "--log-format=json", "--metrics-bind-address=0")...)
	mustCreate(t, cl, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-1", "10.1.0.1"))
	waitImport(t, cl, "dynamo", "relay", "ClusterSetIP [http/TCP/80] clusters=[use1-a] ips svc:true [use1-a:10.1.0.1:true]")
	port := harness.FreePort(t)
	gds := cl.StartGlobalDiscoveryService(t, "global-discovery-service", "--listen="+harness.Addr(port), "--log-format=json",
		"--pool-discovery=mcs", "--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
	gds.WaitHTTP(t, "http://"+harness.Addr(port)+"/readyz", 30*time.Second)

	for _, p := range []*harness.Process{gds, ctl.Process, reg.Process} {
		p.Stop(15 * time.Second)
	}
	for name, p := range map[string]*harness.Process{"mcs-registry": reg.Process, "mcs-controller": ctl.Process, "global-discovery-service": gds} {
		lines, bad := 0, 0
		deprecated := false
		for _, line := range strings.Split(p.Output(), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			lines++
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				if bad++; bad <= 5 {
					t.Errorf("%s printed a line that is not JSON: %q", name, line)
				}
				continue
			}
			if rec["msg"] == "a deprecated flag name was used" {
				deprecated = true
			}
		}
		if lines < 3 { // start, serving, stopping
			t.Errorf("%s printed %d lines: the test saw too little to judge", name, lines)
		}
		if name != "mcs-registry" && !deprecated {
			t.Errorf("%s logged no warning for its deprecated flag name", name)
		}
		t.Logf("%s: %d lines, %d not JSON", name, lines, bad)
	}
}
