package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// dialConn is a plaintext connection to addr, closed when the test ends.
func dialConn(tb testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// dial is a registry client over a plaintext connection.
func dial(tb testing.TB, addr string) registryv1.RegistryServiceClient {
	tb.Helper()
	return registryv1.NewRegistryServiceClient(dialConn(tb, addr))
}

// get is a GET's status and body; a failed request fails the test.
func get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	code, body, err := harness.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	return code, body
}

func relaySpec(port int32) *registryv1.ExportSpec {
	return &registryv1.ExportSpec{
		Type:       registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
		Ports:      []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: port}},
		IpFamilies: []string{"IPv4"},
	}
}

func endpoints(ips ...string) []*registryv1.EndpointGroup {
	g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
	for _, ip := range ips {
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{ip}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
	}
	return []*registryv1.EndpointGroup{g}
}

// restImports is the part of GET /v1/clustersets/prod/imports the test reads.
type restImports struct {
	Imports []struct {
		Service struct{ Namespace, Name string }
		Spec    struct {
			Ports []struct {
				Name string
				Port int
			}
		}
		WinningClusterID string   `json:"winningClusterId"`
		Conflicts        []string `json:"conflicts"`
		Clusters         []struct {
			ClusterID      string   `json:"clusterId"`
			Conflicts      []string `json:"conflicts"`
			EndpointGroups []struct {
				Endpoints []struct{ Addresses []string }
			} `json:"endpointGroups"`
		}
	}
}

// TestRegistryEndToEnd runs the real mcs-registry binary with the memory store: three
// clusters register over gRPC, export conflicting Services, the REST port shows the spec's
// JSON, a lease expires and its endpoints leave the import, and a watch sees it all.
func TestRegistryEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	rest := "http://" + reg.RESTAddr

	if code, body := get(t, "http://"+reg.AdminAddr+"/readyz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	// A clusterset nobody registered in is a clear invalid argument, not an empty answer,
	// over REST and gRPC alike, with a reason a program can test.
	for _, path := range []string{"clusters", "exports", "imports"} {
		if code, body := get(t, rest+"/v1/clustersets/prod/"+path); code != http.StatusBadRequest ||
			!strings.Contains(body, `clusterset: \"prod\" is unknown: no cluster is registered in it`) ||
			!strings.Contains(body, `"reason":"ERROR_REASON_CLUSTERSET_UNKNOWN"`) {
			t.Fatalf("unknown clusterset %s = %d %s", path, code, body)
		}
	}
	if _, err := c.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod"}); !unknownClusterset(err) {
		t.Fatalf("ListImports of an unknown clusterset: %v, want INVALID_ARGUMENT with ERROR_REASON_CLUSTERSET_UNKNOWN", err)
	}
	// The watch starts before anything exists: an empty snapshot first.
	watch, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil {
		t.Fatalf("WatchImports: %v", err)
	}
	if first, err := watch.Recv(); err != nil || !first.GetSnapshot() || len(first.GetUpserts()) != 0 {
		t.Fatalf("first watch message = %v, %v; want an empty snapshot", first, err)
	}

	for _, cl := range []struct {
		id, region string
		lease      time.Duration
	}{{"use1-a", "us-east-1", 0}, {"usw2-a", "us-west-2", 0}, {"euw1-a", "eu-west-1", 5 * time.Second}} {
		req := &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: cl.id, Region: cl.region}
		if cl.lease != 0 {
			req.LeaseDuration = durationpb.New(cl.lease)
		}
		resp, err := c.RegisterCluster(ctx, req)
		if err != nil {
			t.Fatalf("RegisterCluster(%s): %v", cl.id, err)
		}
		want := cl.lease
		if want == 0 {
			want = 30 * time.Second
		}
		if got := resp.GetCluster().GetLease(); got.GetState() != registryv1.LeaseState_LEASE_STATE_ACTIVE || got.GetDuration().AsDuration() != want {
			t.Fatalf("lease of %s = %v, want ACTIVE for %s", cl.id, got, want)
		}
	}

	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}
	put := func(cluster string, port int32, ips ...string) *registryv1.PutExportResponse {
		t.Helper()
		resp, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: cluster, Service: svc, Spec: relaySpec(port), EndpointGroups: endpoints(ips...)})
		if err != nil {
			t.Fatalf("PutExport(%s): %v", cluster, err)
		}
		return resp
	}
	if v := put("use1-a", 80, "10.1.0.1").GetVerdict(); !v.GetParticipating() || len(v.GetConflicts()) != 0 || v.GetWinningClusterId() != "use1-a" {
		t.Fatalf("first export verdict = %v", v)
	}
	time.Sleep(10 * time.Millisecond) // distinct first-seen times: use1-a is the oldest
	put("euw1-a", 80, "10.3.0.1")
	time.Sleep(10 * time.Millisecond)
	v := put("usw2-a", 81, "10.2.0.1", "10.2.0.2").GetVerdict()
	if fmt.Sprint(v.GetConflicts()) != "[CONFLICT_REASON_PORT_CONFLICT]" || v.GetWinningClusterId() != "use1-a" {
		t.Fatalf("conflicting export verdict = %v, want PortConflict with use1-a winning", v)
	}

	// The REST port shows the spec's JSON.
	code, body := get(t, rest+"/v1/clustersets/prod/clusters")
	if code != 200 || strings.Count(body, `"state":"LEASE_STATE_ACTIVE"`) != 3 {
		t.Fatalf("GET clusters = %d %s; want 3 clusters with \"state\":\"LEASE_STATE_ACTIVE\"", code, body)
	}
	var imps restImports
	code, body = get(t, rest+"/v1/clustersets/prod/imports?includeEndpoints=true")
	if code != 200 || json.Unmarshal([]byte(body), &imps) != nil || len(imps.Imports) != 1 {
		t.Fatalf("GET imports = %d %s", code, body)
	}
	imp := imps.Imports[0]
	if imp.Service.Name != "my-dgd-pool-relay" || imp.WinningClusterID != "use1-a" || imp.Spec.Ports[0].Port != 80 || fmt.Sprint(imp.Conflicts) != "[CONFLICT_REASON_PORT_CONFLICT]" {
		t.Fatalf("import = %+v", imp)
	}
	addrs := map[string]int{}
	for _, cl := range imp.Clusters {
		if fmt.Sprint(cl.Conflicts) != "[CONFLICT_REASON_PORT_CONFLICT]" {
			t.Fatalf("cluster %s conflicts = %v; every export reports the conflict", cl.ClusterID, cl.Conflicts)
		}
		for _, g := range cl.EndpointGroups {
			addrs[cl.ClusterID] += len(g.Endpoints)
		}
	}
	if fmt.Sprint(addrs) != "map[euw1-a:1 use1-a:1 usw2-a:2]" {
		t.Fatalf("endpoints per cluster = %v", addrs)
	}
	// Without includeEndpoints, no endpoints.
	if _, body := get(t, rest+"/v1/clustersets/prod/imports"); strings.Contains(body, "10.1.0.1") {
		t.Fatalf("imports without includeEndpoints carry endpoints: %s", body)
	}

	// Bad input is refused with the field and the limit, and changes nothing.
	big := relaySpec(80)
	for i := range 64 {
		big.Ports = append(big.Ports, &registryv1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: "TCP", Port: int32(1000 + i)})
	}
	_, err = c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a", Service: svc, Spec: big})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.ports: 65 ports, at most 64 allowed") {
		t.Fatalf("65 ports: %v", err)
	}
	_, err = c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a", Service: svc, Spec: &registryv1.ExportSpec{Ports: relaySpec(80).Ports}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ExternalName Services cannot be exported") {
		t.Fatalf("no type: %v", err)
	}
	if _, after := get(t, rest+"/v1/clustersets/prod/imports?includeEndpoints=true"); after != body {
		t.Fatalf("a refused export changed the import: %s", after)
	}
	// Malformed JSON over REST is a 400, and the server lives on.
	resp, err := http.Post(rest+"/v1/clustersets/prod/clusters", "application/json", strings.NewReader(`{"clusterId":`))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %v %v", resp.Status, err)
	}
	resp.Body.Close()

	// The watch saw the three exports arrive.
	deadline := time.Now().Add(10 * time.Second)
	clustersSeen := 0
	for clustersSeen != 3 && time.Now().Before(deadline) {
		m, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		for _, u := range m.GetUpserts() {
			clustersSeen = len(u.GetClusters())
		}
	}
	if clustersSeen != 3 {
		t.Fatalf("watch saw %d clusters, want 3", clustersSeen)
	}

	// euw1-a stops renewing: after its 5 s lease its endpoints leave the import, pushed to
	// the watch without any write, and it may not write until it registers again.
	for {
		m, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if u := m.GetUpserts(); len(u) == 1 && len(u[0].GetClusters()) == 2 {
			for _, cl := range u[0].GetClusters() {
				if cl.GetClusterId() == "euw1-a" {
					t.Fatalf("expired cluster still in the import: %v", u[0])
				}
			}
			break
		}
	}
	if _, body := get(t, rest+"/v1/clustersets/prod/clusters"); !strings.Contains(body, `"clusterId":"euw1-a","region":"eu-west-1","lease":{"state":"LEASE_STATE_EXPIRED"`) {
		t.Fatalf("euw1-a not EXPIRED: %s", body)
	}
	if _, body := get(t, rest+"/v1/clustersets/prod/imports?includeEndpoints=true"); strings.Contains(body, "10.3.0.1") {
		t.Fatalf("expired cluster's endpoint still imported: %s", body)
	}
	_, err = c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "euw1-a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.3.0.1")})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "lease expired") {
		t.Fatalf("export from an expired cluster: %v, want FailedPrecondition", err)
	}
	// Renewal brings it back.
	if _, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "euw1-a"}); err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	if _, body := get(t, rest+"/v1/clustersets/prod/imports?includeEndpoints=true"); !strings.Contains(body, "10.3.0.1") {
		t.Fatalf("renewed cluster's endpoint not imported again: %s", body)
	}

	// Metrics name what happened.
	if _, body := get(t, "http://"+reg.AdminAddr+"/metrics"); !strings.Contains(body, `grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="PutExport",grpc_service="globaldiscoverymcs.registry.v1.RegistryService",grpc_type="unary"} 2`) || !strings.Contains(body, "mcs_registry_watches 1") {
		t.Fatalf("metrics missing: %s", grepLines(body, "mcs_registry_")+"\n"+grepLines(body, "grpc_server_handled_total"))
	}

	// SIGTERM with an open watch: the watch ends with UNAVAILABLE and the process exits 0.
	if err := reg.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := watch.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("watch ended with %v, want UNAVAILABLE", err)
			}
			break
		}
	}
	if err := reg.Wait(20 * time.Second); err != nil {
		t.Fatalf("registry did not exit cleanly: %v", err)
	}
}

// TestRegistryRestartLosesMemory: the memory store's restart loses every record; a renewal
// then fails with FAILED_PRECONDITION, which tells a controller to register again.
func TestRegistryRestartLosesMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a"}); err != nil {
		t.Fatal(err)
	}
	reg.Restart(t)
	_, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "use1-a"}, grpc.WaitForReady(true))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "register the cluster first") {
		t.Fatalf("renewal after restart: %v, want FailedPrecondition", err)
	}
	if _, err := c.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "prod"}); !unknownClusterset(err) {
		t.Fatalf("clusters after restart: %v, want INVALID_ARGUMENT with ERROR_REASON_CLUSTERSET_UNKNOWN", err)
	}
}

// TestRegistryBadFlags: a bad flag or key pair is a clear start-up error.
func TestRegistryBadFlags(t *testing.T) {
	bin := harness.Binary(t, "mcs-registry")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--store=etcd"}, `--store: "etcd" is not a store`},
		{[]string{"--tls-cert-file=/nonexistent.crt"}, "--tls-cert-file and --tls-key-file: set both or neither"},
		{[]string{"--tls-cert-file=/nonexistent.crt", "--tls-key-file=/nonexistent.key"}, "--tls-cert-file/--tls-key-file: load key pair"},
	}
	for _, tc := range tests {
		out, err := exec.Command(bin, append(tc.args, "--grpc-addr=127.0.0.1:0", "--rest-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("mcs-registry %v: err=%v output=%s; want it to fail with %q", tc.args, err, out, tc.want)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// unknownClusterset reports the registry's refusal of a clusterset with no registered cluster.
func unknownClusterset(err error) bool {
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason() == registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String() &&
				info.GetMetadata()["clusterset"] == "prod"
		}
	}
	return false
}
