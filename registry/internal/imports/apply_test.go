package imports

import (
	"slices"
	"strconv"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestPlaced: the rule by which whole writes enter one Service's exports, as a table. A
// newer write of a cluster replaces its entry, an older one or the same one (its echo)
// changes nothing and copies nothing, a new cluster's is added in cluster order, and two
// writes of one cluster in one batch keep the newer whatever their order.
func TestPlaced(t *testing.T) {
	at := time.Unix(1000, 0)
	spec := &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP}
	groups := []*registryv1.EndpointGroup{{AddressType: "IPv4"}}
	e := func(cluster string, sec int) store.Export {
		return store.Export{ClusterID: cluster, UpdateTime: at.Add(time.Duration(sec) * time.Second), Spec: spec, EndpointGroups: groups}
	}
	held := []store.Export{e("a", 10), e("c", 10)}
	for _, tc := range []struct {
		name    string
		writes  []store.Export
		changed bool
		want    []string // cluster@second, in order
	}{
		{"a newer write replaces", []store.Export{e("a", 11)}, true, []string{"a@11", "c@10"}},
		{"an older write changes nothing", []store.Export{e("a", 9)}, false, nil},
		{"the same write (its echo) changes nothing", []store.Export{held[0]}, false, nil},
		{"a new cluster is added in order", []store.Export{e("b", 1)}, true, []string{"a@10", "b@1", "c@10"}},
		{"two writes of one cluster, newer first", []store.Export{e("b", 5), e("b", 3)}, true, []string{"a@10", "b@5", "c@10"}},
		{"two writes of one cluster, newer last", []store.Export{e("a", 12), e("a", 13)}, true, []string{"a@13", "c@10"}},
		{"a batch where only one write is news", []store.Export{e("a", 9), e("c", 12)}, true, []string{"a@10", "c@12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]store.Export(nil), held...)
			next, changed := placed(held, tc.writes)
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v", changed, tc.changed)
			}
			var got []string
			for _, x := range next {
				got = append(got, x.ClusterID+"@"+strconv.Itoa(int(x.UpdateTime.Sub(at)/time.Second)))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("exports %v, want %v", got, tc.want)
			}
			for i := range held {
				if !held[i].UpdateTime.Equal(before[i].UpdateTime) || held[i].ClusterID != before[i].ClusterID {
					t.Fatalf("placed changed the slice it was given: %v", held)
				}
			}
		})
	}
}
