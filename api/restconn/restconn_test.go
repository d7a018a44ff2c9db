package restconn

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Every method of the service has its route in registry_http.yaml, and every route names a
// method of the service.
func TestRulesCoverTheService(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	sd := registryv1.File_globaldiscoverymcs_registry_v1_registry_proto.Services().ByName("RegistryService")
	methods := sd.Methods()
	for i := range methods.Len() {
		full := "/" + string(sd.FullName()) + "/" + string(methods.Get(i).Name())
		if _, ok := rules[full]; !ok {
			t.Errorf("%s has no HTTP rule", full)
		}
		delete(rules, full)
	}
	for m := range rules {
		t.Errorf("the rule for %s names no method of the service", m)
	}
}

func TestCalls(t *testing.T) {
	var got []string
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		body, _ := io.ReadAll(r.Body)
		gotBody = string(body)
		if strings.Contains(r.URL.Path, "missing") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":5,"message":"cluster missing is not registered"}`))
			return
		}
		_, _ = w.Write([]byte(`{"deleted":true,"unknownField":1}`))
	}))
	defer srv.Close()
	conn, err := New(srv.URL+"/", srv.Client(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	client := registryv1.NewRegistryServiceClient(conn)
	ctx := t.Context()

	resp, err := client.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "a/b", Service: &registryv1.ServiceKey{Namespace: "ns", Name: "web"}})
	if err != nil || !resp.GetDeleted() {
		t.Fatalf("DeleteExport = %v, %v; want deleted (unknown answer fields ignored)", resp, err)
	}
	if _, err := client.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", IncludeEndpoints: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "c1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gotBody, `"clusterId":"c1"`) {
		t.Errorf("SyncExports body %q: want the request as JSON", gotBody)
	}
	_, err = client.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "missing"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("DeleteCluster of a missing cluster: %v; want NotFound from HTTP 404", err)
	}
	want := []string{
		"DELETE /v1/clustersets/prod/clusters/a%2Fb/exports/ns/web",
		"GET /v1/clustersets/prod/exports?include_endpoints=true",
		"POST /v1/clustersets/prod/clusters/c1/exports:sync",
		"DELETE /v1/clustersets/prod/clusters/missing",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A path field left empty is refused before any request.
	if _, err := client.ListClusters(ctx, &registryv1.ListClustersRequest{}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "clusterset is required") {
		t.Errorf("ListClusters without a clusterset: %v", err)
	}
	// Streams are for the gRPC port.
	if _, err := client.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "prod"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("WatchImports: %v; want Unimplemented", err)
	}
}

// A body larger than the bound is refused, not read whole.
func TestResponseBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"clusters":[` + strings.Repeat(`{"clusterId":"x"},`, 100) + `{}]}`))
	}))
	defer srv.Close()
	conn, err := New(srv.URL, srv.Client(), Options{MaxResponseBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	_, err = registryv1.NewRegistryServiceClient(conn).ListClusters(t.Context(), &registryv1.ListClustersRequest{Clusterset: "prod"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 1.8 KB answer with a 512 B bound: %v; want ResourceExhausted", err)
	}
}
