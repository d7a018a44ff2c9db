package exporter

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// listingRegistry answers ListExports with exports and ListImports with imports, counting
// the ListImports calls.
type listingRegistry struct {
	registryv1.RegistryServiceClient
	exports     []*registryv1.Export
	imports     []*registryv1.ServiceImport
	importLists int
}

func (f *listingRegistry) Call(ctx context.Context, fn func(context.Context, registryv1.RegistryServiceClient) error) error {
	return fn(ctx, f)
}

func (f *listingRegistry) ListExports(context.Context, *registryv1.ListExportsRequest, ...grpc.CallOption) (*registryv1.ListExportsResponse, error) {
	return &registryv1.ListExportsResponse{Exports: f.exports}, nil
}

func (f *listingRegistry) ListImports(context.Context, *registryv1.ListImportsRequest, ...grpc.CallOption) (*registryv1.ListImportsResponse, error) {
	f.importLists++
	return &registryv1.ListImportsResponse{Imports: f.imports}, nil
}

// viewOf is an import watch's view.
type viewOf struct {
	synced  bool
	imports map[types.NamespacedName]*registryv1.ServiceImport
}

func (v viewOf) Get(k types.NamespacedName) *registryv1.ServiceImport { return v.imports[k] }
func (v viewOf) Synced() bool                                         { return v.synced }

// RegistryHolds takes the verdicts from a watch that has had its snapshot, and lists the
// clusterset's imports (whose size grows with every cluster) only before that.
func TestRegistryHoldsReadsVerdictsFromTheWatch(t *testing.T) {
	svc := &registryv1.ServiceKey{Namespace: "n", Name: "svc"}
	content := &registryv1.ExportContent{Service: svc, Spec: &registryv1.ExportSpec{Ports: []*registryv1.ServicePort{{Port: 80, Protocol: "TCP"}}}}
	stored := &registryv1.Export{ClusterId: "a", Service: svc, Spec: content.GetSpec()}
	listed := &registryv1.ServiceImport{Service: svc, WinningClusterId: "b", Clusters: []*registryv1.ImportCluster{{ClusterId: "a"}, {ClusterId: "b"}}}
	watched := &registryv1.ServiceImport{Service: svc, WinningClusterId: "a", Clusters: []*registryv1.ImportCluster{{ClusterId: "a"}}}
	k := types.NamespacedName{Namespace: "n", Name: "svc"}
	for _, tc := range []struct {
		name        string
		view        Imports
		wantLists   int
		wantWinning string
	}{
		{"no watch", nil, 1, "b"},
		{"a watch without its snapshot", viewOf{}, 1, "b"},
		{"a watch with its snapshot", viewOf{synced: true, imports: map[types.NamespacedName]*registryv1.ServiceImport{k: watched}}, 0, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &listingRegistry{exports: []*registryv1.Export{stored}, imports: []*registryv1.ServiceImport{listed}}
			verdicts, same, err := RegistryHolds(context.Background(), reg, tc.view, "prod", "a", []*registryv1.ExportContent{content})
			if err != nil || !same {
				t.Fatalf("RegistryHolds = %v, %v, %v; want the same exports", verdicts, same, err)
			}
			if reg.importLists != tc.wantLists {
				t.Errorf("listed the imports %d times, want %d", reg.importLists, tc.wantLists)
			}
			if v := verdicts[k]; !v.GetParticipating() || v.GetWinningClusterId() != tc.wantWinning {
				t.Errorf("verdict %v, want participating with winner %s", v, tc.wantWinning)
			}
		})
	}
}
