package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// lateProxy is an HTTP proxy to DynamoDB that, while delaying is set, delivers every
// TransactWriteItems (an export write) late and whatever the sender does meanwhile: a
// network that holds a request the registry has given up on.
type lateProxy struct {
	target   string
	delay    time.Duration
	delaying atomic.Bool
}

func (p *lateProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if p.delaying.Load() && strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
		time.Sleep(p.delay)
	}
	out, err := http.NewRequestWithContext(context.Background(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// TestAbandonedWrites: a PutExport whose client gave up (its deadline passed) never
// applies after the DeleteExport the client sent next, with either store. Memory store:
// large exports with deadlines that end while the registry still decodes and checks them.
// DynamoDB store: export writes that reach DynamoDB 300 ms late, after the delete. On the
// previous code the export came back in 24 of 40 (memory) and 4 of 8 (DynamoDB) tries.
func TestAbandonedWrites(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		reg := harness.StartRegistry(t, "--store=memory")
		c := dial(t, reg.GRPCAddr)
		ctx := context.Background()
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a", LeaseDuration: durationpb.New(5 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		big := manyEndpoints(10000)
		back, gaveUp := 0, 0
		for i := range 40 {
			svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc%d", i)}
			pctx, cancel := context.WithTimeout(ctx, time.Duration(1+i)*time.Millisecond)
			_, err := c.PutExport(pctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc, Spec: relaySpec(80), EndpointGroups: big})
			cancel()
			if err == nil {
				continue // applied in time; nothing to check
			}
			gaveUp++
			if _, err := c.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"}); err != nil {
				t.Fatal(err)
			} else {
				for _, e := range list.GetExports() {
					if e.GetService().GetName() == svc.GetName() {
						back++
						// Clean up for the next try's quota.
						_, _ = c.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc})
					}
				}
			}
		}
		t.Logf("%d of 40 puts gave up; %d came back after their delete", gaveUp, back)
		if gaveUp == 0 {
			t.Fatal("no put gave up: the test did not exercise abandoned writes")
		}
		if back != 0 {
			t.Fatalf("%d abandoned puts applied after the delete that followed them", back)
		}
	})
	t.Run("dynamodb", func(t *testing.T) {
		d := harness.StartDynamoDB(t)
		table := newTable(t, d)
		proxy := &lateProxy{target: d.Endpoint, delay: 300 * time.Millisecond}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: proxy}
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(func() { srv.Close() })
		reg := harness.StartRegistry(t, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url=http://"+lis.Addr().String())
		c := dial(t, reg.GRPCAddr)
		ctx := context.Background()
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a", LeaseDuration: durationpb.New(5 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		back := 0
		for i := range 8 {
			svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc%d", i)}
			proxy.delaying.Store(true)
			pctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			_, err := c.PutExport(pctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.0.0.1")})
			cancel()
			proxy.delaying.Store(false)
			if err == nil {
				t.Fatalf("try %d: the put answered within its deadline though DynamoDB got it 300 ms late", i)
			}
			if _, err := c.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the late write has reached DynamoDB
			list, err := c.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list.GetExports() {
				if e.GetService().GetName() == svc.GetName() {
					back++
				}
			}
		}
		if back != 0 {
			t.Fatalf("%d of 8 abandoned puts applied after the delete that followed them", back)
		}
		// A write after all that applies: the fences hold back only older writes.
		svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "later"}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.0.0.1")}); err != nil {
			t.Fatalf("a put after the deletes: %v", err)
		}
	})
}
