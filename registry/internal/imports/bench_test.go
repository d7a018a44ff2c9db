package imports

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

func benchExport(cluster string, svc int, endpoints int) store.Export {
	g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
	for e := range endpoints {
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", svc/256, svc%256, e)},
			Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true), Serving: proto.Bool(true)},
			NodeName:   "ip-10-0-0-1.ec2.internal", Zone: "us-east-1a", TargetPod: fmt.Sprintf("svc-%d-pod-%d", svc, e),
		})
	}
	return store.Export{
		Clusterset: "prod", ClusterID: cluster, Service: store.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%04d", svc)},
		Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, IpFamilies: []string{"IPv4"}},
		EndpointGroups: []*registryv1.EndpointGroup{g}, CreateTime: time.Now(),
	}
}

// BenchmarkClustersetMemory fills the memory store and the imports cache with 100 clusters
// × 1,000 Services × 10 endpoints and reports the live heap after a GC.
func BenchmarkClustersetMemory(b *testing.B) {
	for b.Loop() {
		ctx := context.Background()
		st := memory.New()
		now := time.Now()
		for c := range 100 {
			id := fmt.Sprintf("cluster-%03d", c)
			if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: id, LeaseDuration: time.Hour, RegisterTime: now, RenewTime: now}); err != nil {
				b.Fatal(err)
			}
			exports := make([]store.Export, 1000)
			for s := range 1000 {
				exports[s] = benchExport(id, s, 10)
			}
			if _, _, err := st.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id}, exports); err != nil {
				b.Fatal(err)
			}
		}
		cache := New(Options{Store: st})
		snap, err := cache.List(ctx, "prod", Filter{})
		if err != nil || len(snap.Imports) != 1000 {
			b.Fatalf("imports = %d, %v", len(snap.Imports), err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(st)
		cache.Close() // stops its lease timers, which would keep this iteration alive
	}
}

// BenchmarkFanout100Watchers measures the time from one export write (store write and
// cache refresh, as the server does) until the last of 100 open watches has the change,
// with whole imports and with cluster deltas, and the size of the message they get
// (encoded once for all of them).
func BenchmarkFanout100Watchers(b *testing.B) {
	for _, form := range []struct {
		name   string
		filter Filter
	}{
		{"whole-imports", Filter{IncludeEndpoints: true}},
		{"cluster-deltas", Filter{IncludeEndpoints: true, ClusterDeltas: true}},
	} {
		b.Run(form.name, func(b *testing.B) { benchFanout(b, form.filter) })
	}
}

func benchFanout(b *testing.B, f Filter) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memory.New()
	cache := New(Options{Store: st})
	now := time.Now()
	for c := range 10 {
		id := fmt.Sprintf("cluster-%02d", c)
		_, _ = st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: id, LeaseDuration: time.Hour, RegisterTime: now, RenewTime: now})
		for s := range 100 {
			_, _ = st.PutExport(ctx, benchExport(id, s, 10))
		}
	}
	watchers := make([]*Watcher, 100)
	for i := range watchers {
		w, err := cache.Watch(ctx, "prod", f, 0, "", 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Next(ctx); err != nil {
			b.Fatal(err)
		}
		watchers[i] = w
	}
	var wg sync.WaitGroup
	var size atomic.Int64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		wg.Add(len(watchers))
		for j, w := range watchers {
			go func() {
				defer wg.Done()
				msg, err := w.Next(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				data, err := msg.EncodedProto()
				if err != nil {
					b.Error(err)
				}
				if j == 0 {
					size.Store(int64(len(data)))
				}
			}()
		}
		e := benchExport("cluster-00", 0, 11-i%2) // 11, 10, 11, …: every write changes the import
		if _, err := st.PutExport(ctx, e); err != nil {
			b.Fatal(err)
		}
		if err := cache.Apply(ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: e.Service}); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
	}
	b.ReportMetric(float64(size.Load()), "bytes/msg")
}
