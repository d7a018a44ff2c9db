package merge

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// BenchmarkMerge100Clusters merges one Service exported by 100 clusters with 100
// endpoints each (docs/registry.md, Performance).
func BenchmarkMerge100Clusters(b *testing.B) {
	var exports []store.Export
	ids := make([]string, 100)
	for c := range 100 {
		ids[c] = fmt.Sprintf("cluster-%03d", c)
		g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
		for e := range 100 {
			g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.1", c, e)}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
		}
		exports = append(exports, store.Export{ClusterID: ids[c], Service: svc, Spec: base(), EndpointGroups: []*registryv1.EndpointGroup{g}, CreateTime: now.Add(-time.Duration(c) * time.Second)})
	}
	clusters := active(ids...)
	b.ReportAllocs()
	for b.Loop() {
		if imp := Service(svc, exports, clusters); len(imp.GetClusters()) != 100 {
			b.Fatal("wrong merge")
		}
	}
}
