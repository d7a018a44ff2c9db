package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// fromAddress dials the registry's gRPC listener from a loopback address of its own (Linux
// routes all of 127.0.0.0/8 to lo), so the registry tells the client apart by address.
func fromAddress(t *testing.T, grpcAddr, ip string) *grpc.ClientConn {
	t.Helper()
	_, port, _ := net.SplitHostPort(grpcAddr)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return dialConn(t, "127.0.0.1:"+port,
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }))
}

// retryHint is the RetryInfo of a refusal, or 0.
func retryHint(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// TestClientShareAtTheDoor: a client past its share of a replica (--client-rate,
// --client-burst) is refused at the door — before its request is decoded, so a malformed
// one is refused the same way — with RESOURCE_EXHAUSTED and a retry hint, on gRPC and REST
// alike, and counted by client; another client's lease renewals, writes and watches go on
// untouched; once it waits the hint, the noisy client is served again.
func TestClientShareAtTheDoor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 20 units a second, 100 at once; a request of 1 MiB at most costs 65.
	reg := harness.StartRegistry(t, "--store=memory", "--client-rate=20", "--client-burst=100", "--max-request-bytes=1048576")
	noisyConn, honestConn := fromAddress(t, reg.GRPCAddr, "127.0.0.2"), fromAddress(t, reg.GRPCAddr, "127.0.0.3")
	noisy, honest := registryv1.NewRegistryServiceClient(noisyConn), registryv1.NewRegistryServiceClient(honestConn)
	for c, id := range map[registryv1.RegistryServiceClient]string{noisy: "noisy", honest: "honest"} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	watch, err := honest.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	// Admitted while it has units: a malformed request is decoded and refused for what it is.
	garbage := rawMessage{0x0a, 0x05, 'a'}
	var out emptypb.Empty
	err = noisyConn.Invoke(ctx, "/globaldiscoverymcs.registry.v1.RegistryService/PutExport", garbage, &out, grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a malformed request within the share: %v, want INVALID_ARGUMENT", err)
	}

	// The noisy client writes exports of 200 KiB (14 units each) as fast as it can.
	spec := relaySpec(80)
	spec.ExportedAnnotations = map[string]string{"example.com/blob": strings.Repeat("x", 200<<10)}
	big := &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "noisy", Spec: spec, EndpointGroups: endpoints("10.1.0.1")}
	var refusal error
	admitted := 0
	for i := 0; i < 50 && refusal == nil; i++ {
		big.Service = &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("big-%d", i)}
		if _, err := noisy.PutExport(ctx, big); err != nil {
			refusal = err
		} else {
			admitted++
		}
	}
	st := status.Convert(refusal)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "address 127.0.0.2") ||
		!strings.Contains(st.Message(), "--client-rate") || retryHint(refusal) <= 0 {
		t.Fatalf("after %d writes: %v; want RESOURCE_EXHAUSTED naming the client and --client-rate, with a retry hint", admitted, refusal)
	}
	if admitted > 8 {
		t.Errorf("%d writes of 14 units admitted from a burst of 100", admitted)
	}
	// At the door, before decoding: the malformed request is now refused for the client's debt.
	err = noisyConn.Invoke(ctx, "/globaldiscoverymcs.registry.v1.RegistryService/PutExport", garbage, &out, grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.ResourceExhausted || retryHint(err) <= 0 {
		t.Fatalf("a malformed request in debt: %v, want RESOURCE_EXHAUSTED with a retry hint (refused before decoding)", err)
	}
	if w, err := noisy.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"}); err == nil {
		// A stream's refusal comes with its first Recv.
		if _, err = w.Recv(); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a watch in debt: %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	// REST shares the client's bucket: 429 with Retry-After.
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)
	restFrom := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	resp, err := restFrom.Get("http://127.0.0.1:" + restPort + "/v1/clustersets/prod/imports")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "RetryInfo") {
		t.Fatalf("REST in debt: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	// Meanwhile the honest client is served in full.
	for i := range 20 {
		if _, err := honest.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "honest"}); err != nil {
			t.Fatalf("honest renewal %d: %v", i, err)
		}
	}
	if _, err := honest.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "honest", Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "calm"},
		Spec: relaySpec(80), EndpointGroups: endpoints("10.2.0.1")}); err != nil {
		t.Fatalf("honest write: %v", err)
	}
	for {
		m, err := watch.Recv()
		if err != nil {
			t.Fatalf("honest watch: %v", err)
		}
		if slices.ContainsFunc(m.GetUpserts(), func(i *registryv1.ServiceImport) bool { return i.GetService().GetName() == "calm" }) {
			break
		}
	}

	// After the hint, the noisy client is served again.
	_, err = noisy.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "noisy"})
	time.Sleep(retryHint(err) + 50*time.Millisecond)
	if _, err := noisy.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "noisy"}); err != nil {
		t.Fatalf("after its retry hint: %v", err)
	}

	noisyRefusals := metric(t, reg, `mcs_registry_client_throttled_total{client="address 127.0.0.2"}`)
	if noisyRefusals < 4 || metric(t, reg, `mcs_registry_client_throttled_total{client="address 127.0.0.3"}`) != 0 ||
		metric(t, reg, `mcs_registry_limit_refusals_total{limit="client_rate"}`) != noisyRefusals {
		t.Errorf("throttled: noisy %v, honest %v, limit %v", noisyRefusals, metric(t, reg, `mcs_registry_client_throttled_total{client="address 127.0.0.3"}`),
			metric(t, reg, `mcs_registry_limit_refusals_total{limit="client_rate"}`))
	}
}
