package fleet

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// The shared codec decodes a watch message exactly as protobuf does, and two equal parts
// (in two messages, as two watches receive them) are one object.
func TestSharedCodecDecodesAndShares(t *testing.T) {
	part := func(id string) *registryv1.ImportCluster {
		return &registryv1.ImportCluster{ClusterId: id, ExportCreateTime: timestamppb.New(timestamppb.Now().AsTime()),
			EndpointGroups: exportOf(keyOf("a"), 1, 2, 3).GetEndpointGroups()}
	}
	a, b := part("sim-0000"), part("sim-0001")
	for _, tc := range []struct {
		name string
		msg  *registryv1.WatchImportsResponse
	}{
		{"snapshot", &registryv1.WatchImportsResponse{Epoch: "e1", Revision: 7, Snapshot: true, StartedEmpty: timestamppb.Now(),
			Upserts: []*registryv1.ServiceImport{{Service: &registryv1.ServiceKey{Namespace: "n", Name: "a"}, WinningClusterId: "sim-0000", Clusters: []*registryv1.ImportCluster{a, b}}}}},
		{"deltas", &registryv1.WatchImportsResponse{Epoch: "e1", Revision: 8,
			Deltas:  []*registryv1.ImportDelta{{Service: &registryv1.ServiceKey{Namespace: "n", Name: "a"}, Header: &registryv1.ImportHeader{WinningClusterId: "sim-0001"}, Clusters: []*registryv1.ImportCluster{b}, RemovedClusterIds: []string{"sim-0000"}}},
			Deletes: []*registryv1.ServiceKey{{Namespace: "n", Name: "b"}}}},
		{"empty", &registryv1.WatchImportsResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			c := newSharedCodec()
			first, second := &registryv1.WatchImportsResponse{}, &registryv1.WatchImportsResponse{}
			for _, out := range []*registryv1.WatchImportsResponse{first, second} {
				if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, out); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(out, tc.msg) {
					t.Fatalf("decoded %v, want %v", out, tc.msg)
				}
			}
			if got, want := c.received.Load(), int64(2*len(wire)); got != want {
				t.Errorf("received %d bytes, want %d", got, want)
			}
			for i, imp := range first.GetUpserts() {
				for j, p := range imp.GetClusters() {
					if second.GetUpserts()[i].GetClusters()[j] != p {
						t.Errorf("upsert %d part %d decoded twice", i, j)
					}
				}
			}
			for i, d := range first.GetDeltas() {
				for j, p := range d.GetClusters() {
					if second.GetDeltas()[i].GetClusters()[j] != p {
						t.Errorf("delta %d part %d decoded twice", i, j)
					}
				}
			}
		})
	}
	if err := newSharedCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x22, 0x05, 0x01})}, &registryv1.WatchImportsResponse{}); err == nil {
		t.Error("a truncated message decoded without an error")
	}
}

func keyOf(name string) types.NamespacedName { return types.NamespacedName{Namespace: "n", Name: name} }
