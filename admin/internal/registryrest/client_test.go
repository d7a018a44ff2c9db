package registryrest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

func TestNewOptions(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string // empty: no error
	}{
		{"plain http", Options{URL: "http://localhost:8080"}, ""},
		{"https with system roots", Options{URL: "https://mcs-registry.example.internal:8080/"}, ""},
		{"no scheme", Options{URL: "localhost:8080"}, "--registry-rest-url \"localhost:8080\": must be like https://"},
		{"grpc scheme", Options{URL: "grpc://localhost:9090"}, "must be like https://"},
		{"a path", Options{URL: "https://r:8080/v1"}, "must have no path or query"},
		{"cert without key", Options{URL: "https://r:8080", CertFile: "a.crt"}, "--registry-tls-cert-file and --registry-tls-key-file: give both or neither"},
		{"TLS files with http", Options{URL: "http://r:8080", CAFile: notPEM}, "TLS files are given but the URL is http://"},
		{"missing CA file", Options{URL: "https://r:8080", CAFile: filepath.Join(dir, "none")}, "--registry-tls-ca-file: open"},
		{"CA file without PEM", Options{URL: "https://r:8080", CAFile: notPEM}, "no PEM certificate in it"},
		{"missing key pair", Options{URL: "https://r:8080", CertFile: filepath.Join(dir, "a.crt"), KeyFile: filepath.Join(dir, "a.key")}, "--registry-tls-cert-file/--registry-tls-key-file: open"},
	}
	for _, tc := range tests {
		_, err := New(tc.opts)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestRefusals serves each answer over HTTP and reads it through the client's whole path:
// the generated client, restconn's HTTP mapping and the refusal into *Error.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		wantMessage string
		wantCode    codes.Code
		wantUnknown bool
	}{
		{"unknown clusterset", 400, `{"code":3,"message":"clusterset: \"prod\" is unknown: no cluster is registered in it","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"ERROR_REASON_CLUSTERSET_UNKNOWN","domain":"d","metadata":{"clusterset":"prod"}}]}`,
			`clusterset: "prod" is unknown: no cluster is registered in it`, codes.InvalidArgument, true},
		{"invalid name", 400, `{"code":3,"message":"clusterset: \"Prod\" must be a DNS label","details":[]}`, `clusterset: "Prod" must be a DNS label`, codes.InvalidArgument, false},
		{"permission denied", 403, `{"code":7,"message":"DeleteCluster of prod/use1-a needs an admin identity","details":[]}`, "DeleteCluster of prod/use1-a needs an admin identity", codes.PermissionDenied, false},
		{"not JSON", 502, "<html>Bad Gateway</html>", "<html>Bad Gateway</html>", codes.Unavailable, false},
		{"long body", 502, strings.Repeat("x", 300), strings.Repeat("x", 200) + "...", codes.Unavailable, false},
	}
	for _, tc := range tests {
		var gotPath string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotPath = r.Method + " " + r.URL.RequestURI()
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		c, err := New(Options{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.DeleteCluster(t.Context(), store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"})
		srv.Close()
		if gotPath != "DELETE /v1/clustersets/prod/clusters/use1-a" {
			t.Errorf("%s: the request was %q", tc.name, gotPath)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %T (%v) is not *Error", tc.name, err, err)
		}
		if e.Message != tc.wantMessage || e.Code != tc.wantCode || e.HTTPStatus != tc.status || unknownClusterset(err) != tc.wantUnknown {
			t.Errorf("%s: got %+v (unknown clusterset %v), want message %q code %v unknown %v", tc.name, e, unknownClusterset(err), tc.wantMessage, tc.wantCode, tc.wantUnknown)
		}
	}
}

// TestRequests checks each call's route and query against a recording server.
func TestRequests(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.ListClusters(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListExports(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListUnreadable(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteExport(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}, store.ServiceKey{Namespace: "team a", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GET /v1/clustersets/prod/clusters",
		"GET /v1/clustersets/prod/exports?include_endpoints=true",
		"GET /v1/clustersets/prod/exports",
		"DELETE /v1/clustersets/prod/clusters/use1-a/exports/team%20a/web",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
