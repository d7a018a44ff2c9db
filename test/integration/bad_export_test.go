package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// restCall sends one JSON request to the registry's REST port and returns the status code
// and body.
func restCall(t *testing.T, method, url string, body proto.Message) (int, string) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = protojson.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// restCluster registers a cluster over REST with a lease that outlasts the test, as any
// client of the registry's API can (the Python and TypeScript packages, grpcurl).
func restCluster(t *testing.T, reg *harness.Registry, id string) {
	t.Helper()
	code, body := restCall(t, http.MethodPost, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters",
		&registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, Region: "us-east-1", LeaseDuration: durationpb.New(10 * time.Minute)})
	if code != http.StatusOK {
		t.Fatalf("register %s: %d %s", id, code, body)
	}
}

// restExport writes an export over REST and returns the answer.
func restExport(t *testing.T, reg *harness.Registry, req *registryv1.PutExportRequest) (int, string) {
	t.Helper()
	return restCall(t, http.MethodPut, fmt.Sprintf("http://%s/v1/clustersets/prod/clusters/%s/exports/%s/%s",
		reg.RESTAddr, req.GetClusterId(), req.GetService().GetNamespace(), req.GetService().GetName()), req)
}

// sourceState is what a cluster imported of one source cluster for a Service: its
// addresses and the names of its slices' ports, sorted.
func sourceState(t *testing.T, c *harness.Cluster, ns, name, source string) string {
	t.Helper()
	var slices discoveryv1.EndpointSliceList
	if err := c.Client.List(context.Background(), &slices, client.InNamespace(ns),
		client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: source}); err != nil {
		t.Fatal(err)
	}
	var addrs, ports []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		for _, p := range s.Ports {
			ports = append(ports, *p.Name)
		}
	}
	sort.Strings(addrs)
	sort.Strings(ports)
	return fmt.Sprintf("%v ports=%v", addrs, ports)
}

// badRow is an export one cluster wrote that once broke every cluster's import of the
// Service; refused names the field of the registry's 400 answer, "" when it is accepted.
type badRow struct {
	name    string
	mutate  func(*registryv1.PutExportRequest)
	refused string
	// portClash: the row's port and the good cluster's cannot both be in the union, so
	// the newer export's port is excluded from the import and from its slices.
	portClash bool
}

func badRows() []badRow {
	group := func(r *registryv1.PutExportRequest) *registryv1.EndpointGroup { return r.EndpointGroups[0] }
	addr := func(family, a string) func(*registryv1.PutExportRequest) {
		return func(r *registryv1.PutExportRequest) {
			group(r).AddressType = family
			group(r).Endpoints[0].Addresses = []string{a}
		}
	}
	return []badRow{
		{"endpoint without conditions", func(r *registryv1.PutExportRequest) { group(r).Endpoints[0].Conditions = nil }, "", false},
		{"unnamed port (valid alone)", func(r *registryv1.PutExportRequest) {
			r.Spec.Ports = []*registryv1.ServicePort{{Protocol: "TCP", Port: 81}}
			group(r).Ports[0].Name = ""
		}, "", true},
		{"appProtocol not a qualified name", func(r *registryv1.PutExportRequest) { r.Spec.Ports[0].AppProtocol = "Grpc Over TLS!" }, "spec.ports[0].app_protocol", false},
		{"appProtocol of 256 characters", func(r *registryv1.PutExportRequest) { r.Spec.Ports[0].AppProtocol = strings.Repeat("a", 256) }, "spec.ports[0].app_protocol", false},
		{"single-label FQDN", addr("FQDN", "backend"), "endpoint_groups[0].endpoints[0].addresses[0]", false},
		{"non-canonical IPv6", addr("IPv6", "FD00:0:0:0:0:0:0:1"), "endpoint_groups[0].endpoints[0].addresses[0]", false},
		{"IPv4-mapped IPv6", addr("IPv6", "::ffff:10.9.0.1"), "endpoint_groups[0].endpoints[0].addresses[0]", false},
		{"loopback", addr("IPv4", "127.0.0.1"), "loopback range", false},
		{"metadata service", addr("IPv4", "169.254.169.254"), "link-local range", false},
		{"unspecified", addr("IPv4", "0.0.0.0"), "may not be unspecified", false},
		{"link-local multicast", addr("IPv4", "224.0.0.1"), "link-local multicast range", false},
		{"two endpoint ports named \"\"", func(r *registryv1.PutExportRequest) {
			group(r).Ports = []*registryv1.EndpointPort{{Protocol: "TCP", Port: 8080}, {Protocol: "TCP", Port: 8081}}
		}, "endpoint_groups[0].ports[1].name", false},
		{"endpoint port without protocol", func(r *registryv1.PutExportRequest) { group(r).Ports[0].Protocol = "" }, "", false},
		{"endpoint port with a bad appProtocol", func(r *registryv1.PutExportRequest) { group(r).Ports[0].AppProtocol = "Grpc Over TLS!" }, "endpoint_groups[0].ports[0].app_protocol", false},
		{"annotations of exactly 256 KiB", func(r *registryv1.PutExportRequest) {
			r.Spec.ExportedAnnotations = map[string]string{"example.com/a": strings.Repeat("v", 256*1024-len("example.com/a"))}
		}, "spec.exported_annotations", false},
		{"the same port name on another number (excluded)", func(r *registryv1.PutExportRequest) { r.Spec.Ports[0].Port = 8081 }, "", true},
	}
}

// TestOneClustersExportBreaksOnlyItself: a registered cluster writes, over REST, each
// export that once broke every member's import of the Service — once after a good cluster
// exported it and once before. The registry refuses what no member could write (400 naming
// the field) and the rest imports; the good cluster's endpoint changes reach both member
// clusters all along, no controller panics, a port the registry excluded for the bad cluster
// is in none of its imported slices, and mcs-admin describe works.
func TestOneClustersExportBreaksOnlyItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a", "usw2-a"}})
	a, b := cls[0], cls[1]
	for _, c := range cls {
		createNamespaces(t, ctx, c.Client, "dynamo")
	}
	ctlA := a.StartController(t, "mcs-controller/use1-a", controllerArgs(reg, "use1-a")...)
	ctlB := b.StartController(t, "mcs-controller/usw2-a", controllerArgs(reg, "usw2-a")...)
	restCluster(t, reg, "bad")

	// goodHas waits for use1-a's endpoints of a Service in both clusters, with its port
	// unless the registry excluded it.
	goodHas := func(name string, excluded bool, ips ...string) {
		t.Helper()
		want := fmt.Sprintf("%v ports=[http]", ips)
		if excluded {
			want = fmt.Sprintf("%v ports=[]", ips)
		}
		start := time.Now()
		for _, c := range cls {
			harness.Eventually(t, fmt.Sprintf("%s: use1-a's endpoints of %s", c.Name, name), 15*time.Second, func() string {
				if got := sourceState(t, c, "dynamo", name, "use1-a"); got != want {
					return "got " + got + ", want " + want
				}
				return ""
			})
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: use1-a's change took %s to reach both clusters", name, d)
		}
	}
	for _, phase := range []string{"after", "before"} {
		for i, row := range badRows() {
			name := fmt.Sprintf("%s-%d", phase, i)
			req := &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "bad", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name},
				Spec: relaySpec(80), EndpointGroups: endpoints("10.9.0.1")}
			row.mutate(req)
			// Before the good cluster, a clashing row is the oldest export: the good
			// cluster's port is the one excluded (the oldest export wins, KEP-1645).
			goodExcluded := phase == "before" && row.portClash
			goodExport := func() {
				mustCreate(t, a, service("dynamo", name, 80), serviceExport("dynamo", name), slice("dynamo", name, name+"-a", "10.1.0.1"))
				goodHas(name, goodExcluded, "10.1.0.1")
			}
			if phase == "after" {
				goodExport()
			}
			code, body := restExport(t, reg, req)
			switch {
			case row.refused == "" && code != http.StatusOK:
				t.Fatalf("%s (%s): %d %s, want it accepted", row.name, phase, code, body)
			case row.refused != "" && (code != http.StatusBadRequest || !strings.Contains(body, row.refused)):
				t.Fatalf("%s (%s): %d %.300s, want 400 naming %s", row.name, phase, code, body, row.refused)
			}
			if phase == "before" {
				goodExport()
			}
			// The good cluster keeps changing its endpoints: each change reaches both clusters.
			var s discoveryv1.EndpointSlice
			if err := a.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: name + "-a"}, &s); err != nil {
				t.Fatal(err)
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}})
			if err := a.Client.Update(ctx, &s); err != nil {
				t.Fatal(err)
			}
			goodHas(name, goodExcluded, "10.1.0.1", "10.1.0.2")
			if row.refused != "" {
				continue
			}
			// An accepted row imports too, in both clusters, and the ServiceImport's status is
			// written.
			for _, c := range cls {
				harness.Eventually(t, fmt.Sprintf("%s: bad's endpoints of %s (%s)", c.Name, name, row.name), 15*time.Second, func() string {
					got := sourceState(t, c, "dynamo", name, "bad")
					if !strings.HasPrefix(got, "[10.9.0.1]") {
						return "bad: " + got
					}
					if row.portClash && phase == "after" && got != "[10.9.0.1] ports=[]" {
						return "bad's slice carries the excluded port: " + got
					}
					si := &mcsv1beta1.ServiceImport{}
					if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: name}, si); err != nil {
						return err.Error()
					}
					if r := meta.FindStatusCondition(si.Status.Conditions, "Ready"); r == nil || r.Status != "True" || len(si.Spec.IPs) == 0 {
						return fmt.Sprintf("ServiceImport Ready %+v ips %v", r, si.Spec.IPs)
					}
					return ""
				})
			}
		}
	}
	for _, p := range []*harness.Controller{ctlA, ctlB} {
		if out := p.Output(); strings.Contains(out, "panic") || strings.Contains(out, "Observed a panic") {
			t.Fatalf("a controller panicked:\n%s", out[max(0, strings.Index(out, "panic")-2000):])
		}
	}
	out, err := execAdminRegistry(t, "--registry-rest-url=http://"+reg.RESTAddr, "describe", "--clusterset-id=prod")
	if err != nil || !strings.Contains(out, "bad") || !strings.Contains(out, "after-0") {
		t.Fatalf("mcs-admin describe: %v\n%s", err, out)
	}
}
