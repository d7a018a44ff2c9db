// Package storetest is the conformance suite every registry store passes. A store's own
// tests call Run with a function that returns a fresh, empty store.
package storetest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) store.Store

// t0 is a fixed base time; stores must keep times to the millisecond at least.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the conformance suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RegisterAndGet", testRegisterAndGet},
		{"ReRegisterKeepsRegisterTime", testReRegisterKeepsRegisterTime},
		{"RenewNeverCreates", testRenewNeverCreates},
		{"ListClustersSortedAndScoped", testListClustersSortedAndScoped},
		{"PutExportNeedsCluster", testPutExportNeedsCluster},
		{"PutExportKeepsCreateTime", testPutExportKeepsCreateTime},
		{"DeleteExport", testDeleteExport},
		{"DeleteClusterRemovesExports", testDeleteClusterRemovesExports},
		{"SyncExportsReplacesSet", testSyncExportsReplacesSet},
		{"SyncExportsMany", testSyncExportsMany},
		{"ListExportsSorted", testListExportsSorted},
		{"ListClusterExports", testListClusterExports},
		{"LargeEndpointSet", testLargeEndpointSet},
		{"ChangesDelivered", testChangesDelivered},
		{"ConcurrentWriters", testConcurrentWriters},
		{"AbandonedWritesDoNotApply", testAbandonedWritesDoNotApply},
		{"Ping", func(t *testing.T, s store.Store) {
			if err := s.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func cluster(cs, id string, renew time.Time) store.Cluster {
	return store.Cluster{Clusterset: cs, ClusterID: id, Region: "us-east-1", LeaseDuration: 30 * time.Second, RegisterTime: renew, RenewTime: renew}
}

func export(cs, id, ns, name string, port int32, at time.Time) store.Export {
	return store.Export{
		Clusterset: cs, ClusterID: id,
		Service: store.ServiceKey{Namespace: ns, Name: name},
		Spec: &registryv1.ExportSpec{
			Type:  registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP,
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: port}},
		},
		EndpointGroups: []*registryv1.EndpointGroup{{
			AddressType: "IPv4",
			Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints:   []*registryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}}},
		}},
		CreateTime: at, UpdateTime: at,
	}
}

func mustRegister(t *testing.T, s store.Store, c store.Cluster) store.Cluster {
	t.Helper()
	got, err := s.RegisterCluster(context.Background(), c)
	if err != nil {
		t.Fatalf("RegisterCluster(%s/%s): %v", c.Clusterset, c.ClusterID, err)
	}
	return got
}

func mustPut(t *testing.T, s store.Store, e store.Export) store.Export {
	t.Helper()
	got, err := s.PutExport(context.Background(), e)
	if err != nil {
		t.Fatalf("PutExport(%s from %s): %v", e.Service, e.ClusterID, err)
	}
	return got
}

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}
