package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// fillClusterset gives clusterset prod clusters × services exports of perExport endpoints
// each, from clusters f00, f01, ….
func fillClusterset(t *testing.T, ctx context.Context, c registryv1.RegistryServiceClient, clusters, services, perExport int) {
	t.Helper()
	for i := range clusters {
		id := fmt.Sprintf("f%02d", i)
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, LeaseDuration: durationpb.New(5 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		exports := make([]*registryv1.ExportContent, services)
		for j := range exports {
			exports[j] = &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("pool%d", j)},
				Spec: relaySpec(80), EndpointGroups: manyEndpoints(perExport)}
		}
		if _, err := c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: id, Exports: exports}); err != nil {
			t.Fatal(err)
		}
	}
}

// stuckREST opens a REST watch with endpoints and never reads its answer.
func stuckREST(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET /v1/clustersets/prod/imports:watch?includeEndpoints=true HTTP/1.1\r\nHost: registry\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// stallProxy forwards connections to target, and passes the server's bytes on only up to
// the first limit bytes of each connection: behind it, a gRPC client looks like one that
// stopped reading.
func stallProxy(t *testing.T, target string, limit int64) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			_ = out.(*net.TCPConn).SetReadBuffer(4096)
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(out, in) }()
			go func() { _, _ = io.CopyN(in, out, limit) }() // then never reads again
		}
	}()
	return lis.Addr().String()
}

// TestStuckWatchers: watchers that stop reading a large clusterset (20 over REST, 5 over
// gRPC) keep the registry's RSS under 500 MiB, are closed after --send-timeout with
// RESOURCE_EXHAUSTED, and a well-behaved cluster's renewals and watch are not disturbed.
// Before the send timeout, each stuck REST watcher held ~59 MiB until its client left.
func TestStuckWatchers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--send-timeout=4s")
	c := dial(t, reg.GRPCAddr)
	fillClusterset(t, ctx, c, 5, 10, 1000) // 50,000 endpoints: a ~2 MB snapshot
	by := startBystander(t, ctx, c)
	base := harness.ReadProcStat(reg.Pid()).RSSMiB

	peak := 0.0
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := harness.ReadProcStat(reg.Pid()).RSSMiB; r > peak {
				peak = r
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	for range 20 {
		stuckREST(t, reg.RESTAddr)
	}
	proxy := stallProxy(t, reg.GRPCAddr, 64<<10)
	for range 5 {
		go func() {
			stuck := dial(t, proxy)
			w, err := stuck.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod", IncludeEndpoints: true})
			if err == nil {
				_, _ = w.Recv()
			}
		}()
	}
	// A gRPC Send returns once its message is queued (the transport holds one message per
	// stream); the next one waits for the stuck client, so change something.
	time.Sleep(time.Second)
	if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "f00",
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "pool0"}, Spec: relaySpec(81), EndpointGroups: manyEndpoints(1000)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the registry closes the stuck watches", 60*time.Second, func() string {
		if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="send_timeout"}`); n < 25 {
			return fmt.Sprintf("%v of 25 stuck watches closed for the send timeout", n)
		}
		if n := metric(t, reg, "mcs_registry_watches "); n != 1 {
			return fmt.Sprintf("%v watches open, want the bystander's alone", n)
		}
		return ""
	})
	close(stopSampling)
	<-sampled
	t.Logf("registry RSS %.0f MiB before the stuck watchers, peak %.0f MiB with them", base, peak)
	if peak > 500 {
		t.Errorf("registry RSS peaked at %.0f MiB with 25 stuck watchers, want under 500 MiB", peak)
	}
	by.check(t, ctx, c, "after-stuck-watchers")
}

// TestWatchLimits: --max-watches bounds the open watches, gRPC and REST alike, with a
// RESOURCE_EXHAUSTED naming the flag; a closed watch frees its place.
func TestWatchLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--max-watches=3")
	c := dial(t, reg.GRPCAddr)
	wctx, stop := context.WithCancel(ctx)
	for range 2 {
		w, err := c.WatchImports(wctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	rest := stuckREST(t, reg.RESTAddr) // the third, over REST
	harness.Eventually(t, "three watches open", 10*time.Second, func() string {
		if n := metric(t, reg, "mcs_registry_watches "); n != 3 {
			return fmt.Sprintf("%v watches", n)
		}
		return ""
	})
	w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
	if err == nil {
		_, err = w.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watches") {
		t.Fatalf("a fourth watch: %v; want RESOURCE_EXHAUSTED naming --max-watches", err)
	}
	code, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports:watch")
	if code != 429 || !strings.Contains(body, "--max-watches") {
		t.Fatalf("a fourth watch over REST: %d %s; want 429 naming --max-watches", code, body)
	}
	rest.Close()
	stop()
	harness.Eventually(t, "closed watches free their places", 10*time.Second, func() string {
		w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
		if err == nil {
			_, err = w.Recv()
		}
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="watches"}`); n < 2 {
		t.Errorf("watches refusals = %v, want at least 2", n)
	}
}

// TestIdleConnections: the registry closes connections that make no call: raw TCP that
// never starts a handshake (after 10 s), gRPC connections with no call and REST keep-alive
// connections (after --idle-timeout). Before, 1,500 of 1,500 idle connections stayed open.
func TestIdleConnections(t *testing.T) {
	reg := harness.StartRegistry(t, "--store=memory", "--idle-timeout=2s")
	closed := func(name string, conn net.Conn, within time.Duration) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: still open after %s", name, within)
		}
	}
	var raw []net.Conn
	for range 200 {
		conn, err := net.Dial("tcp", reg.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		raw = append(raw, conn)
	}
	// An HTTP/2 connection that says hello (preface and SETTINGS) and makes no call.
	h2, err := net.Dial("tcp", reg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	fr := http2.NewFramer(h2, h2)
	if _, err := io.WriteString(h2, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// A REST keep-alive connection after one answered request.
	rest, err := net.Dial("tcp", reg.RESTAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	if _, err := io.WriteString(rest, "GET /v1/clustersets/prod/imports HTTP/1.1\r\nHost: registry\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	closed("an idle HTTP/2 connection", h2, 12*time.Second) // --idle-timeout, then 5 s for the GOAWAY ping
	closed("an idle REST keep-alive connection", rest, 8*time.Second)
	t.Logf("idle HTTP/2 and REST connections closed after %s", time.Since(start).Round(100*time.Millisecond))
	for i, conn := range raw {
		closed(fmt.Sprintf("raw connection %d", i), conn, 15*time.Second-time.Since(start))
	}
	t.Logf("200 connections without a handshake closed after %s", time.Since(start).Round(100*time.Millisecond))
}

// TestWatchesPerClient: with client certificates, --max-watches-per-client bounds one
// identity's open watches (gRPC and REST together); another identity is not affected.
func TestWatchesPerClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serverCA, clientCA := harness.NewCA(t, "server"), harness.NewCA(t, "clients")
	certFile, keyFile := serverCA.IssueServer(t, "registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile,
		"--client-ca-file="+clientCA.CertFile, "--trust-domain=example.org", "--max-watches-per-client=2")
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)
	day := time.Now().Add(24 * time.Hour)
	aCert, aKey := clientCA.IssueClient(t, "use1-a", []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, day)
	bCert, bKey := clientCA.IssueClient(t, "usw2-a", []string{"spiffe://example.org/clusterset/prod/cluster/usw2-a"}, day)
	aTLS := serverCA.ClientConfig(t, "localhost", aCert, aKey)
	a := dialTLS(t, "localhost:"+grpcPort, aTLS)
	b := dialTLS(t, "localhost:"+grpcPort, serverCA.ClientConfig(t, "localhost", bCert, bKey))
	open := func(c registryv1.RegistryServiceClient) error {
		w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
		if err == nil {
			_, err = w.Recv()
		}
		return err
	}
	if err := open(a); err != nil {
		t.Fatal(err)
	}
	// The second of a's watches over REST.
	restClient := &http.Client{Transport: &http.Transport{TLSClientConfig: aTLS}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://localhost:"+restPort+"/v1/clustersets/prod/imports:watch", nil)
	resp, err := restClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a's REST watch: %s", resp.Status)
	}
	err = open(a)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watches-per-client") ||
		!strings.Contains(st.Message(), "spiffe://example.org/clusterset/prod/cluster/use1-a") {
		t.Fatalf("a's third watch: %v; want RESOURCE_EXHAUSTED naming the identity and --max-watches-per-client", err)
	}
	for range 2 {
		if err := open(b); err != nil {
			t.Fatalf("another identity's watch: %v", err)
		}
	}
	if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="watches_per_client"}`); n != 1 {
		t.Errorf("watches_per_client refusals = %v, want 1", n)
	}
}

// TestWatchesPerAddress: without client certificates, --max-watches-per-client counts a
// client's watches by its IP address, so one client cannot take every slot of
// --max-watches: its watch past the limit is refused naming its address, and a client on
// another address still gets a watch. Before, without mTLS only --max-watches counted.
func TestWatchesPerAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory", "--max-watches=10", "--max-watches-per-client=3")
	// Two clients on two loopback addresses.
	from := func(ip string) registryv1.RegistryServiceClient {
		return registryv1.NewRegistryServiceClient(fromAddress(t, reg.GRPCAddr, ip))
	}
	noisy, honest := from("127.0.0.2"), from("127.0.0.3")
	open := func(c registryv1.RegistryServiceClient) error {
		w, err := c.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"})
		if err == nil {
			_, err = w.Recv()
		}
		return err
	}
	for i := range 3 {
		if err := open(noisy); err != nil {
			t.Fatalf("noisy client's watch %d: %v", i, err)
		}
	}
	for i := range 5 {
		err := open(noisy)
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watches-per-client") ||
			!strings.Contains(st.Message(), "127.0.0.2") {
			t.Fatalf("noisy client's watch %d past the limit: %v; want RESOURCE_EXHAUSTED naming its address and --max-watches-per-client", 4+i, err)
		}
	}
	if err := open(honest); err != nil {
		t.Fatalf("a client on another address: %v; want its watch served", err)
	}
	if n := metric(t, reg, `mcs_registry_limit_refusals_total{limit="watches_per_client"}`); n != 5 {
		t.Errorf("watches_per_client refusals = %v, want 5", n)
	}
}
