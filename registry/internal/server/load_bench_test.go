package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// BenchmarkSyncLoad: 100 clusters × 1,000 Services × 10 endpoints sent by SyncExports at
// once, in process over an in-memory listener with the memory store: the registry's own
// work for the load of test/integration's BenchmarkRegistryLoad/memory, without other
// processes on the cores, and with -cpuprofile to see where it goes.
//
//	cd registry && go test -run '^$' -bench SyncLoad -benchtime 1x -cpuprofile /tmp/cpu.out ./internal/server/
func BenchmarkSyncLoad(b *testing.B) {
	const clusters, services, endpoints = 100, 1000, 10
	reqs := make([]*registryv1.SyncExportsRequest, clusters)
	for i := range clusters {
		req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: fmt.Sprintf("load-%03d", i)}
		for s := range services {
			g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}}}
			for e := range endpoints {
				g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i, s%256, e)}})
			}
			req.Exports = append(req.Exports, &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("pool-%04d", s)},
				Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}}}, EndpointGroups: []*registryv1.EndpointGroup{g}})
		}
		reqs[i] = req
	}
	for b.Loop() {
		b.StopTimer()
		c := serve(b, Options{})
		for i := range clusters {
			if _, err := c.RegisterCluster(context.Background(), &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: fmt.Sprintf("load-%03d", i), Region: "r", LeaseDuration: durationpb.New(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for _, req := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.SyncExports(context.Background(), req); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}
