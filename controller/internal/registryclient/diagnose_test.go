package registryclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDiagnose(t *testing.T) {
	unavailable := func(desc string) error {
		return fmt.Errorf("no registry URL answered: %w", errors.Join(fmt.Errorf("https://r:443: %w",
			status.Error(codes.Unavailable, "connection error: desc = \""+desc+"\""))))
	}
	tests := []struct {
		err  error
		want string // a substring of the hint; "": no hint
	}{
		{nil, ""},
		{unavailable("transport: authentication handshake failed: credentials: cannot check peer: missing selected ALPN property."), "HTTP2Preferred or HTTP2Only"},
		{unavailable("transport: authentication handshake failed: tls: first record does not look like a TLS handshake"), "answers in plaintext"},
		{unavailable("error reading server preface: EOF"), "use an https:// URL"},
		{unavailable("transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for a.example, not b.example"), "does not name the URL's host"},
		{unavailable("tls: failed to verify certificate: x509: cannot validate certificate for 10.0.0.1 because it doesn't contain any IP SANs"), "does not name the URL's host"},
		{unavailable("tls: failed to verify certificate: x509: certificate signed by unknown authority"), "--registry-tls-ca-file"},
		{unavailable("tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time"), "renew it"},
		{unavailable("remote error: tls: certificate required"), "--registry-tls-cert-file"},
		{unavailable("dial tcp 10.0.0.1:443: connect: connection refused"), ""},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), ""},
	}
	for _, tc := range tests {
		got := Diagnose(tc.err)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Diagnose(%v) = %q, want a hint with %q", tc.err, got, tc.want)
		}
	}
}
