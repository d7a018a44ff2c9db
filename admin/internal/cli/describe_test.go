package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// fixedData is a clusterset as the store or the registry returns it.
type fixedData struct {
	clusters   []store.Cluster
	exports    []store.Export
	unreadable []store.Unreadable
}

func (f fixedData) ListClusters(context.Context, string) ([]store.Cluster, error) {
	return f.clusters, nil
}
func (f fixedData) ListExports(context.Context, string) ([]store.Export, error) {
	return f.exports, nil
}
func (f fixedData) DeleteCluster(context.Context, store.ClusterKey) (int, error) { return 0, nil }
func (f fixedData) ListUnreadable(context.Context, string) ([]store.Unreadable, error) {
	return f.unreadable, nil
}
func (f fixedData) DeleteExport(context.Context, store.ClusterKey, store.ServiceKey) (bool, error) {
	return false, nil
}

// describeAll describes one export in every output format.
func describeAll(t *testing.T, req *registryv1.PutExportRequest) Description {
	t.Helper()
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	data := fixedData{
		clusters: []store.Cluster{{Clusterset: "prod", ClusterID: "bad", LeaseDuration: time.Minute, RenewTime: now}},
		exports: []store.Export{{Clusterset: "prod", ClusterID: "bad", Service: store.ServiceKey{Namespace: "dynamo", Name: "router"},
			Spec: req.GetSpec(), EndpointGroups: req.GetEndpointGroups(), CreateTime: now, UpdateTime: now}},
	}
	d, err := describe(context.Background(), data, "prod", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"table", "json", "yaml"} {
		if err := printDescription(io.Discard, d, o); err != nil {
			t.Fatalf("-o %s: %v", o, err)
		}
	}
	return d
}

// TestDescribeEndpointWithoutConditions: an endpoint the registry accepted without
// conditions is "unknown", counted as ready as an EndpointSlice consumer reads it.
func TestDescribeEndpointWithoutConditions(t *testing.T) {
	d := describeAll(t, &registryv1.PutExportRequest{
		Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS},
		EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}},
			{Addresses: []string{"10.0.0.2"}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(false)}},
		}}},
	})
	if e := d.Exports[0]; e.Endpoints != 2 || e.ReadyEndpoints != 1 {
		t.Fatalf("export %+v", e)
	}
}

// TestDescribeLocality: an export's locality policy is described as the annotation spells
// it; an export without one leaves it to the importers' default.
func TestDescribeLocality(t *testing.T) {
	d := describeAll(t, &registryv1.PutExportRequest{Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS,
		Locality: []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION}}})
	if got := d.Exports[0].Locality; got != "cluster,region" {
		t.Fatalf("locality %q, want cluster,region", got)
	}
	var b strings.Builder
	if err := printDescription(&b, describeAll(t, &registryv1.PutExportRequest{Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS}}), "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "LOCALITY") || !strings.Contains(b.String(), "(default)") {
		t.Fatalf("table without the default locality:\n%s", b.String())
	}
}

// TestDescribeLocalityTiers: describe names, for each Service, the clusters whose importers
// send its traffic to each tier — the registry's merge, then the importer's choice — and
// leaves out clusters whose lease expired.
func TestDescribeLocalityTiers(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	cluster := func(id, region string, renewed time.Time) store.Cluster {
		return store.Cluster{Clusterset: "prod", ClusterID: id, Region: region, LeaseDuration: time.Minute, RenewTime: renewed}
	}
	clusters := []store.Cluster{
		cluster("use1-a", "us-east-1", now), cluster("use1-b", "us-east-1", now), cluster("euw1-a", "eu-west-1", now),
		cluster("apse1-a", "ap-southeast-1", now), cluster("gone", "us-east-1", now.Add(-time.Hour)),
	}
	export := func(id string, ready bool, age time.Duration, tiers ...registryv1.LocalityTier) store.Export {
		return store.Export{Clusterset: "prod", ClusterID: id, Service: store.ServiceKey{Namespace: "dynamo", Name: "pool"},
			Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS, Locality: tiers},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{
				{Addresses: []string{"10.0.0.1"}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(ready)}}}}},
			CreateTime: now.Add(-age), UpdateTime: now}
	}
	tc, tr, ta := registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION, registryv1.LocalityTier_LOCALITY_TIER_ANY
	tests := []struct {
		name    string
		exports []store.Export
		want    string
	}{
		{"default policy", []store.Export{export("use1-a", true, time.Hour), export("euw1-a", true, time.Minute)},
			"cluster,region (default): cluster=euw1-a,use1-a region=use1-b any=apse1-a"},
		{"the oldest export's policy", []store.Export{export("euw1-a", true, time.Hour, tr), export("use1-a", true, time.Minute, tc)},
			"region: region=euw1-a,use1-a,use1-b any=apse1-a"},
		{"not ready is no tier", []store.Export{export("use1-a", false, time.Hour, tc, tr), export("euw1-a", true, time.Minute, tc, tr)},
			"cluster,region: cluster=euw1-a any=apse1-a,use1-a,use1-b"},
		{"any", []store.Export{export("use1-a", true, time.Hour, ta)},
			"any: any=apse1-a,euw1-a,use1-a,use1-b"},
		{"an expired cluster's export takes no part", []store.Export{export("gone", true, time.Hour, tc)}, ""},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			d, err := describe(context.Background(), fixedData{clusters: clusters, exports: c.exports}, "prod", now)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, l := range d.Locality {
				got = l.Policy
				if l.PolicyDefault {
					got += " (default)"
				}
				got += ":"
				for _, tier := range l.Tiers {
					got += " " + tier.Tier + "=" + strings.Join(tier.Clusters, ",")
				}
			}
			if got != c.want {
				t.Fatalf("locality %q, want %q", got, c.want)
			}
			var b strings.Builder
			if err := printDescription(&b, d, "table"); err != nil {
				t.Fatal(err)
			}
			if c.want != "" && !strings.Contains(b.String(), "NAMESPACE  NAME  POLICY") {
				t.Fatalf("table without the locality section:\n%s", b.String())
			}
		})
	}
}

// FuzzDescribe: every export the registry accepts is described without a panic.
func FuzzDescribe(f *testing.F) {
	seed, _ := proto.Marshal(&registryv1.PutExportRequest{
		Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: 80}}},
		EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}},
	})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &registryv1.PutExportRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		var errs validate.Errors
		validate.ExportSpec(&errs, "spec", req.GetSpec())
		validate.EndpointGroups(&errs, "endpoint_groups", req.GetEndpointGroups())
		if errs.Len() > 0 {
			return
		}
		describeAll(t, req)
	})
}

// TestDescribeListsUnreadable: describe lists the items no read can decode, in every
// output format, naming the key, the cluster and the reason.
func TestDescribeListsUnreadable(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	data := fixedData{unreadable: []store.Unreadable{{Clusterset: "prod", Key: "EXPORT#dynamo/ghost#a", ClusterID: "a",
		Service: store.ServiceKey{Namespace: "dynamo", Name: "ghost"}, Reason: "0 of 2 endpoint chunks"}}}
	d, err := describe(context.Background(), data, "prod", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Unreadable) != 1 || d.Unreadable[0].Name != "ghost" || d.Unreadable[0].ClusterID != "a" {
		t.Fatalf("unreadable = %+v", d.Unreadable)
	}
	for _, o := range []string{"table", "json", "yaml"} {
		var b strings.Builder
		if err := printDescription(&b, d, o); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"EXPORT#dynamo/ghost#a", "0 of 2 endpoint chunks"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("-o %s does not show %q:\n%s", o, want, b.String())
			}
		}
	}
}
