package merge

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// FuzzMerge merges two arbitrary export specs: the merge must never panic, must be
// deterministic, and must report the same conflicts for both exports; when both exports
// meet the export contract, so does the import's port list (the derived Service is valid).
func FuzzMerge(f *testing.F) {
	a, _ := proto.Marshal(base())
	b, _ := proto.Marshal(&registryv1.ExportSpec{Type: headless, Ports: []*registryv1.ServicePort{port("http", "UDP", 81)}})
	f.Add(a, b, int64(5), int64(5))
	f.Add([]byte{}, []byte{}, int64(0), int64(-1))
	// An unnamed port and a named one: valid alone, an invalid Service together.
	unnamed, _ := proto.Marshal(&registryv1.ExportSpec{Type: clusterIP, Ports: []*registryv1.ServicePort{port("", "TCP", 80)}})
	named, _ := proto.Marshal(&registryv1.ExportSpec{Type: clusterIP, Ports: []*registryv1.ServicePort{port("grpc", "TCP", 9000)}})
	f.Add(unnamed, named, int64(5), int64(1))
	f.Add(unnamed, named, int64(1), int64(5))
	f.Fuzz(func(t *testing.T, ra, rb []byte, ageA, ageB int64) {
		sa, sb := &registryv1.ExportSpec{}, &registryv1.ExportSpec{}
		if proto.Unmarshal(ra, sa) != nil || proto.Unmarshal(rb, sb) != nil {
			return
		}
		exports := []store.Export{
			{ClusterID: "a", Service: svc, Spec: sa, CreateTime: now.Add(-time.Duration(ageA))},
			{ClusterID: "b", Service: svc, Spec: sb, CreateTime: now.Add(-time.Duration(ageB))},
		}
		first := Service(svc, exports, active("a", "b"))
		second := Service(svc, []store.Export{exports[1], exports[0]}, active("a", "b"))
		if !proto.Equal(first, second) {
			t.Fatalf("merge depends on input order:\n%v\n%v", first, second)
		}
		if len(first.GetClusters()) != 2 {
			t.Fatalf("clusters = %d, want 2", len(first.GetClusters()))
		}
		for _, c := range first.GetClusters() {
			if len(c.GetConflicts()) != len(first.GetConflicts()) {
				t.Fatalf("cluster %s reports %v, import %v", c.GetClusterId(), c.GetConflicts(), first.GetConflicts())
			}
		}
		var in validate.Errors
		validate.ExportSpec(&in, "a", sa)
		validate.ExportSpec(&in, "b", sb)
		if in.Len() > 0 {
			return
		}
		union := proto.Clone(first.GetSpec()).(*registryv1.ImportSpec)
		var out validate.Errors
		validate.ExportSpec(&out, "import", &registryv1.ExportSpec{Ports: union.GetPorts(), Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS})
		if out.Len() > 0 {
			t.Fatalf("two accepted exports merge into an invalid port list: %v\n%v\n%v", out.Err(), sa, sb)
		}
	})
}
