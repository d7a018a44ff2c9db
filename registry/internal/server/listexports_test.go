package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// clusterListsCounted counts the reads of whole cluster lists.
type clusterListsCounted struct {
	*memory.Store
	lists atomic.Int64
}

func (s *clusterListsCounted) ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error) {
	s.lists.Add(1)
	return s.Store.ListClusters(ctx, clusterset)
}

// TestEmptyExportCheckReadsItsCluster: a registered cluster that exports nothing yet
// checks its exports every minute; telling its clusterset known takes a read of the
// cluster, not of every cluster of the clusterset (which grows with the fleet). An
// unknown clusterset is still told apart.
func TestEmptyExportCheckReadsItsCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &clusterListsCounted{Store: memory.New()}
	cache := imports.New(imports.Options{Store: st})
	go func() { _ = cache.Run(ctx) }()
	svc := New(Options{Store: st, Cache: cache})
	for _, id := range []string{"a", "b"} {
		if _, err := svc.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id}); err != nil {
			t.Fatal(err)
		}
	}
	st.lists.Store(0)
	resp, err := svc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "a"})
	if err != nil || len(resp.GetExports()) != 0 {
		t.Fatalf("cluster a's exports: %v, %v; want none", resp, err)
	}
	if n := st.lists.Load(); n != 0 {
		t.Errorf("an empty check of a registered cluster read the clusterset's cluster list %d times, want 0", n)
	}
	_, err = svc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "nowhere", ClusterId: "a"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("a check in an unknown clusterset: %v, want InvalidArgument (unknown)", err)
	}
	if resp, err := svc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "ghost"}); err != nil || len(resp.GetExports()) != 0 {
		t.Errorf("an unregistered cluster of a known clusterset: %v, %v; want an empty list", resp, err)
	}
}
