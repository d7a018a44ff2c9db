package registryclient

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func TestParseURLs(t *testing.T) {
	tests := []struct {
		urls     []string
		insecure bool
		want     string // addresses joined, or the error substring
		wantErr  bool
	}{
		{[]string{"https://mcs-registry.example.internal:9090"}, false, "mcs-registry.example.internal:9090", false},
		{[]string{"https://mcs-registry.example.internal"}, false, "mcs-registry.example.internal:443", false},
		{[]string{"http://mcs-registry.mcs-system.svc"}, true, "mcs-registry.mcs-system.svc:80", false},
		{[]string{"https://global.example:9090", "https://use1.example:9090"}, false, "global.example:9090 use1.example:9090", false},
		{[]string{"https://[fd00::1]:9090"}, false, "[fd00::1]:9090", false},
		{[]string{"http://mcs-registry:9090"}, false, "use https:// or set --registry-allow-insecure-http", true},
		{[]string{"https://a:9090", "http://b:9090"}, true, "every URL must use the same scheme", true},
		{[]string{"grpc://a:9090"}, false, "the scheme must be https or http", true},
		{[]string{"https://a:9090/v1"}, false, "a gRPC URL has no path", true},
		{[]string{"mcs-registry:9090"}, false, "not a URL like https://", true},
		{nil, false, "at least one URL is required", true},
	}
	for _, tc := range tests {
		targets, err := ParseURLs(tc.urls, tc.insecure)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseURLs(%v) error = %v, want %q", tc.urls, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURLs(%v): %v", tc.urls, err)
			continue
		}
		var addrs []string
		for _, tg := range targets {
			addrs = append(addrs, tg.Address)
		}
		if got := strings.Join(addrs, " "); got != tc.want {
			t.Errorf("ParseURLs(%v) = %s, want %s", tc.urls, got, tc.want)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	if _, err := TLSConfig("/nonexistent/ca.crt", "", ""); err == nil || !strings.Contains(err.Error(), "--registry-tls-ca-file") {
		t.Fatalf("missing CA file error = %v", err)
	}
	cfg, err := TLSConfig("", "", "")
	if err != nil || cfg.RootCAs != nil {
		t.Fatalf("no CA file: %v, roots %v; want the system roots", err, cfg.RootCAs)
	}
}

func TestClustersetUnknown(t *testing.T) {
	withInfo := func(code codes.Code, reason string) error {
		st, err := status.New(code, "clusterset: \"prod\" is unknown").WithDetails(&errdetails.ErrorInfo{Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	unknown := registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"the registry's refusal", withInfo(codes.InvalidArgument, unknown), true},
		{"a malformed name", status.Error(codes.InvalidArgument, "clusterset: must be a DNS label"), false},
		{"another reason", withInfo(codes.InvalidArgument, "SOMETHING_ELSE"), false},
		{"the reason on another code", withInfo(codes.NotFound, unknown), false},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), false},
		{"not a status", errors.New("boom"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := ClustersetUnknown(tc.err); got != tc.want {
			t.Errorf("%s: ClustersetUnknown(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
