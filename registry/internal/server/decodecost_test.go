package server

import (
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// tinyEndpoints is a SyncExportsRequest of about size bytes, all of it empty endpoints
// (two bytes each on the wire, a few hundred decoded), in exports of perExport each.
func tinyEndpoints(size, perExport int) []byte {
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "prod")
	for len(req) < size {
		var group []byte
		for range perExport {
			group = protowire.AppendTag(group, 3, protowire.BytesType) // EndpointGroup.endpoints
			group = protowire.AppendVarint(group, 0)
		}
		var export []byte
		export = protowire.AppendTag(export, 3, protowire.BytesType) // ExportContent.endpoint_groups
		export = protowire.AppendBytes(export, group)
		req = protowire.AppendTag(req, 3, protowire.BytesType) // SyncExportsRequest.exports
		req = protowire.AppendBytes(req, export)
	}
	return req
}

// decodeThroughCodec runs a request's bytes through the server codec and the handler's
// check, as grpc-go does, and returns the error and the bytes allocated meanwhile.
func decodeThroughCodec(t *testing.T, raw []byte, into proto.Message) (uint64, error) {
	t.Helper()
	d := NewDecoding()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := d.check(into, d.Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, into))
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// TestDecodeCostBounded: a 10 MB request of empty endpoints (which decoded took 416 MiB of
// RSS) is refused with RESOURCE_EXHAUSTED before it is decoded, allocating less than 10×
// its size; honest requests as large as the quotas allow decode as before.
func TestDecodeCostBounded(t *testing.T) {
	raw := tinyEndpoints(10<<20, 10000)
	alloc, err := decodeThroughCodec(t, raw, &registryv1.SyncExportsRequest{})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Fatalf("a %d-byte request of empty endpoints: %v; want RESOURCE_EXHAUSTED", len(raw), err)
	}
	if alloc > 10*uint64(len(raw)) {
		t.Errorf("refusing a %d-byte request allocated %d bytes; want at most 10× its size", len(raw), alloc)
	}
	t.Logf("a %d-byte request of empty endpoints: refused after allocating %d bytes (%.1f×)", len(raw), alloc, float64(alloc)/float64(len(raw)))

	// Honest: 50,000 endpoints (the default per-cluster quota) with an address, a hostname
	// and conditions each, in 5 exports.
	req := &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "a"}
	for e := range 5 {
		g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}}}
		for i := range 10000 {
			g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", e, i>>8, i&255)},
				Hostname: fmt.Sprintf("pod-%d", i), Zone: "us-east-1a", Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}})
		}
		req.Exports = append(req.Exports, &registryv1.ExportContent{Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("s%d", e)},
			Spec: &registryv1.ExportSpec{Ports: []*registryv1.ServicePort{{Name: "http", Port: 80}}}, EndpointGroups: []*registryv1.EndpointGroup{g}})
	}
	honest, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got := &registryv1.SyncExportsRequest{}
	if _, err := decodeThroughCodec(t, honest, got); err != nil {
		t.Fatalf("an honest %d-byte request of 50,000 endpoints: %v", len(honest), err)
	}
	if !proto.Equal(got, req) {
		t.Fatal("the honest request decoded differently")
	}
}

// FuzzDecodeCost: the scan never panics nor loops, whatever the bytes.
func FuzzDecodeCost(f *testing.F) {
	f.Add(tinyEndpoints(1<<10, 10))
	b, _ := proto.Marshal(&registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a", Spec: &registryv1.ExportSpec{ExportedAnnotations: map[string]string{"a": "b"}},
		EndpointGroups: []*registryv1.EndpointGroup{{Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, m := range []proto.Message{&registryv1.SyncExportsRequest{}, &registryv1.PutExportRequest{}} {
			_ = checkDecodeCost(m.ProtoReflect().Descriptor(), raw)
		}
	})
}
