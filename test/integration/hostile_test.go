package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// bystander is a well-behaved cluster that renews its lease and keeps a watch open while a
// test attacks the registry: every failure it sees is counted.
type bystander struct {
	renewFailures, watchEnds atomic.Int64
	updates                  atomic.Int64
}

func startBystander(t *testing.T, ctx context.Context, c registryv1.RegistryServiceClient) *bystander {
	t.Helper()
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "bystander", LeaseDuration: durationpb.New(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	b := &bystander{}
	go func() {
		for ctx.Err() == nil {
			if _, err := c.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "bystander"}); err != nil && ctx.Err() == nil {
				b.renewFailures.Add(1)
				t.Logf("bystander renewal: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				if ctx.Err() == nil {
					b.watchEnds.Add(1)
					t.Logf("bystander watch ended: %v", err)
				}
				return
			}
			b.updates.Add(1)
		}
	}()
	return b
}

// check fails the test when the bystander saw a failure, and proves its watch still
// delivers by exporting a Service and waiting for the update.
func (b *bystander) check(t *testing.T, ctx context.Context, c registryv1.RegistryServiceClient, name string) {
	t.Helper()
	before := b.updates.Load()
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "bystander",
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name}, Spec: relaySpec(80)}); err != nil {
		t.Fatalf("bystander export: %v", err)
	}
	harness.Eventually(t, "the bystander's watch delivers", 10*time.Second, func() string {
		if b.updates.Load() == before {
			return "no update"
		}
		return ""
	})
	if n, m := b.renewFailures.Load(), b.watchEnds.Load(); n != 0 || m != 0 {
		t.Fatalf("the bystander saw %d failed renewals and %d ended watches", n, m)
	}
}

// TestHostileInput sends the registry requests built to make it work or answer far more
// than their size, and checks every answer is a small INVALID_ARGUMENT naming the field,
// the registry's RSS stays under 300 MiB, and a well-behaved cluster's renewals and watch
// are not disturbed.
func TestHostileInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	by := startBystander(t, ctx, c)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "hostile"}); err != nil {
		t.Fatal(err)
	}
	const maxMessage = 16 << 10
	invalid := func(name string, err error, want string) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) || len(st.Message()) > maxMessage {
			t.Errorf("%s: %s, %d-byte message %.300q; want a short INVALID_ARGUMENT with %q", name, st.Code(), len(st.Message()), st.Message(), want)
		}
	}
	// Error amplification: each empty export has several errors; the answer lists the first
	// ten. Before the cap, 9,999 empty exports got an 11 MB answer.
	empty := make([]*registryv1.ExportContent, 9999)
	for i := range empty {
		empty[i] = &registryv1.ExportContent{}
	}
	_, err := c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "hostile", Exports: empty})
	invalid("9,999 empty exports", err, "only the first 10 errors are reported")
	over := make([]*registryv1.ExportContent, 40000)
	for i := range over {
		over[i] = &registryv1.ExportContent{}
	}
	_, err = c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "hostile", Exports: over})
	invalid("40,000 exports", err, "exports: 40000 exports, at most 10000 allowed")

	// 10,000 endpoints of 100 long bad addresses each: ~15 MB, under --max-request-bytes.
	bad := strings.Repeat("z", 14)
	g := &registryv1.EndpointGroup{AddressType: "IPv4"}
	for range 10000 {
		addrs := make([]string, 100)
		for j := range addrs {
			addrs[j] = bad
		}
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: addrs})
	}
	for range 3 {
		_, err = c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "hostile",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "svc"}, Spec: relaySpec(80), EndpointGroups: []*registryv1.EndpointGroup{g}})
		invalid("a million bad addresses", err, `endpoint_groups[0].endpoints[0].addresses[0]: "zzzzzzzzzzzzzz" is not an IPv4 address`)
	}
	// A value of a megabyte is not repeated back.
	_, err = c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: strings.Repeat("a", 1<<20)})
	invalid("a 1 MiB cluster id", err, "(1048576 bytes)")
	// Control characters in the region.
	_, err = c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "ctl", Region: "us-east-1\n\x00"})
	invalid("a region with control characters", err, "region: ")

	if rss := harness.ReadProcStat(reg.Pid()).RSSMiB; rss > 300 {
		t.Errorf("registry RSS %.0f MiB after the hostile requests, want under 300 MiB", rss)
	} else {
		t.Logf("registry RSS %.0f MiB after the hostile requests", rss)
	}
	by.check(t, ctx, c, "after-hostile")
}

// TestRegistryRefusals: what the registry reference promises for malformed and
// out-of-lease requests — undecodable bytes and invalid UTF-8 are INVALID_ARGUMENT (not
// INTERNAL), and a DeleteExport from an unregistered cluster, or one whose lease expired,
// is refused with FAILED_PRECONDITION and deletes nothing.
func TestRegistryRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	conn := dialConn(t, reg.GRPCAddr)
	// Raw bytes on the wire: a truncated field, and a string field holding invalid UTF-8
	// (field 1, clusterset: tag 0x0a, length 2, 0xff 0xfe).
	for name, raw := range map[string][]byte{"truncated": {0x0a, 0x05, 'a'}, "invalid UTF-8": {0x0a, 0x02, 0xff, 0xfe}} {
		var out emptypb.Empty
		err := conn.Invoke(ctx, "/globaldiscoverymcs.registry.v1.RegistryService/RenewLease", rawMessage(raw), &out, grpc.ForceCodecV2(rawCodec{}))
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "not a valid protobuf message") {
			t.Errorf("%s request: %s %q, want INVALID_ARGUMENT", name, st.Code(), st.Message())
		}
	}

	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "svc"}
	_, err := c.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "nobody", Service: svc})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteExport from an unregistered cluster: %v, want FAILED_PRECONDITION", err)
	}
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a", LeaseDuration: durationpb.New(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc, Spec: relaySpec(80)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5500 * time.Millisecond)
	_, err = c.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "lease expired at") {
		t.Errorf("DeleteExport with an expired lease: %v, want FAILED_PRECONDITION", err)
	}
	list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod"})
	if err != nil || len(list.GetExports()) != 1 {
		t.Fatalf("the refused delete changed the exports: %v %v", list, err)
	}
}

// rawMessage is a request sent as the bytes it holds.
type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

// TestHostileREST: one REST client's bad requests — an oversized body, oversized headers,
// metadata headers, a body that is not JSON, a request whose error lists thousands of
// problems, a flood of them at once — are answered (or refused) one by one, and another
// client's REST watch and calls go on. All REST calls once shared one in-process gRPC
// connection, which one oversized answer ended (COMPRESSION_ERROR) for everyone.
func TestHostileREST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--max-request-bytes=1048576")
	c := dial(t, reg.GRPCAddr)
	by := startBystander(t, ctx, c)
	base := "http://" + reg.RESTAddr

	// The other client's REST watch: every line it reads is counted.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/clustersets/prod/imports:watch", nil)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed below; the linter misses it past the goroutine.
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines atomic.Int64
	watchErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"error"`) {
				watchErr <- fmt.Errorf("the watch ended with %s", sc.Text())
				return
			}
			lines.Add(1)
		}
		watchErr <- fmt.Errorf("the watch ended: %v", sc.Err())
	}()

	send := func(method, path string, body []byte, header map[string]string) (int, string) {
		r, _ := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			r.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	empty := `{"clusterId":"hostile","exports":[` + strings.TrimSuffix(strings.Repeat(`{},`, 9999), ",") + `]}`
	cases := []struct {
		name       string
		method     string
		path, body string
		header     map[string]string
		wantCode   int
	}{
		{"a body over --max-request-bytes", http.MethodPost, "/v1/clustersets/prod/clusters", `{"clusterId":"` + strings.Repeat("a", 2<<20) + `"}`, nil, http.StatusBadRequest},
		{"headers over 64 KiB", http.MethodGet, "/v1/clustersets/prod/imports", "", map[string]string{"X-Big": strings.Repeat("h", 70<<10)}, http.StatusRequestHeaderFieldsTooLarge},
		{"metadata headers", http.MethodGet, "/v1/clustersets/prod/imports", "", map[string]string{"Grpc-Metadata-X-Mcs-Client-Identity": "spiffe://x/admin", "Grpc-Metadata-Big": strings.Repeat("m", 60<<10)}, http.StatusOK},
		{"a body that is not JSON", http.MethodPost, "/v1/clustersets/prod/clusters", `{"clusterId":`, nil, http.StatusBadRequest},
		{"9,999 empty exports", http.MethodPost, "/v1/clustersets/prod/clusters/hostile/exports:sync", empty, nil, http.StatusBadRequest},
	}
	for _, tc := range cases {
		code, body := send(tc.method, tc.path, []byte(tc.body), tc.header)
		if code != tc.wantCode || len(body) > 16<<10 {
			t.Errorf("%s: %d, %d-byte answer %.200q; want %d and a short answer", tc.name, code, len(body), body, tc.wantCode)
		}
	}
	// All of them at once, many times over.
	var wg sync.WaitGroup
	for range 10 {
		for _, tc := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				send(tc.method, tc.path, []byte(tc.body), tc.header)
			}()
		}
	}
	wg.Wait()

	before := lines.Load()
	by.check(t, ctx, c, "after-hostile-rest")
	harness.Eventually(t, "the other client's REST watch delivers", 10*time.Second, func() string {
		select {
		case err := <-watchErr:
			t.Fatal(err)
		default:
		}
		if lines.Load() == before {
			return "no line"
		}
		return ""
	})
	if code, body := send(http.MethodGet, "/v1/clustersets/prod/imports", nil, nil); code != http.StatusOK || !strings.Contains(body, "after-hostile-rest") {
		t.Fatalf("another client's REST call: %d %.300s", code, body)
	}
}

// TestRESTErrorsNameTheField: a REST body with a value protojson refuses is answered 400
// naming the field (a bad Duration once answered without it), and a path segment with an
// encoded slash is answered 400 naming the parameter (it was routed nowhere: 404). Nothing
// stored changes.
func TestRESTErrorsNameTheField(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	by := startBystander(t, ctx, c)
	base := "http://" + reg.RESTAddr
	send := func(method, path, body string) (int, string) {
		r, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, method, path, body string
		wantField                string
	}{
		{"a Duration that is not one", http.MethodPost, "/v1/clustersets/prod/clusters", `{"clusterId":"a","leaseDuration":"abc"}`, "field leaseDuration"},
		{"a Duration under its proto name", http.MethodPost, "/v1/clustersets/prod/clusters", `{"cluster_id":"a","lease_duration":7}`, "field lease_duration"},
		{"a nested port that is not a number", http.MethodPost, "/v1/clustersets/prod/clusters/a/exports:sync",
			`{"exports":[{"service":{"namespace":"dynamo","name":"x"}},{"service":{"namespace":"dynamo","name":"y"},"spec":{"ports":[{"port":80},{"port":"http"}]}}]}`,
			"field exports[1].spec.ports[1].port"},
		{"an enum that does not exist", http.MethodPost, "/v1/clustersets/prod/clusters/a/exports:sync",
			`{"exports":[{"service":{"namespace":"dynamo","name":"x"},"spec":{"type":"LOAD_BALANCER"}}]}`, "exports[0].spec.type"},
		{"an encoded slash in the clusterset", http.MethodGet, "/v1/clustersets/prod%2Fother/imports", "", "clusterset"},
		{"an encoded slash in the cluster id", http.MethodDelete, "/v1/clustersets/prod/clusters/a%2Fb", "", "cluster_id"},
	} {
		code, body := send(tc.method, tc.path, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.wantField) {
			t.Errorf("%s: %d %.300s; want 400 naming %q", tc.name, code, body, tc.wantField)
		}
	}
	by.check(t, ctx, c, "after-bad-rest")
}

// TestDecodeCostOfOneRequest: ten 10 MB requests of empty endpoints (two bytes each on the
// wire, hundreds decoded) are refused with RESOURCE_EXHAUSTED before they are decoded: the
// registry's RSS grows by less than 10× one request, and a bystander goes on. One such
// request once took 416 MiB.
func TestDecodeCostOfOneRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	by := startBystander(t, ctx, c)
	conn := dialConn(t, reg.GRPCAddr, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	defer conn.Close()
	// SyncExportsRequest{clusterset: "prod", exports: [{endpoint_groups: [{endpoints: [{}, {}, …]}]}, …]}
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "prod")
	for len(req) < 10<<20 {
		var group []byte
		for range 10000 {
			group = protowire.AppendTag(group, 3, protowire.BytesType)
			group = protowire.AppendVarint(group, 0)
		}
		export := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), group)
		req = protowire.AppendTag(req, 3, protowire.BytesType)
		req = protowire.AppendBytes(req, export)
	}
	base := harness.ReadProcStat(reg.Pid()).RSSMiB
	for i := range 10 {
		var out emptypb.Empty
		err := conn.Invoke(ctx, "/globaldiscoverymcs.registry.v1.RegistryService/SyncExports", rawMessage(req), &out, grpc.ForceCodecV2(rawCodec{}))
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "would allocate more than") {
			t.Fatalf("request %d: %s %q; want RESOURCE_EXHAUSTED before decoding", i, st.Code(), st.Message())
		}
	}
	grown := harness.ReadProcStat(reg.Pid()).RSSMiB - base
	t.Logf("registry RSS grew by %.0f MiB for ten %d-byte requests", grown, len(req))
	if grown > 10*float64(len(req))/(1<<20) {
		t.Errorf("RSS grew by %.0f MiB; want less than 10× one request (%.0f MiB)", grown, 10*float64(len(req))/(1<<20))
	}
	by.check(t, ctx, c, "after-costly-requests")
}
