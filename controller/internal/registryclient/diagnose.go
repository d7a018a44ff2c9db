package registryclient

import "strings"

// Hint is a user-facing cause of, and fix for, a registry error that a misconfiguration
// causes. Each Match is a substring of the error text that grpc-go or crypto/tls write.
type Hint struct {
	Match []string
	Text  string
}

// Hints are the misconfigurations the controller recognizes, in the order they are tried.
var Hints = []Hint{
	{[]string{"missing selected ALPN property"},
		"the TLS endpoint did not negotiate HTTP/2 (ALPN h2), which gRPC requires: a load balancer that ends TLS must offer h2, " +
			"for example an AWS NLB TLS listener with the ALPN policy HTTP2Preferred or HTTP2Only"},
	{[]string{"first record does not look like a TLS handshake"},
		"the URL is https:// but the registry answers in plaintext: use an http:// URL with --registry-allow-insecure-http, " +
			"or serve TLS on the registry (--tls-cert-file and --tls-key-file, or registry.tls.secretName in the chart)"},
	{[]string{"error reading server preface", "connection closed before server preface received", "http2: frame too large"},
		"the connection closed before the registry spoke HTTP/2: if the registry or its load balancer serves TLS, use an https:// URL"},
	{[]string{"certificate is valid for", "certificate is not valid for any names", "doesn't contain any IP SANs"},
		"the registry's certificate does not name the URL's host: add the host to the certificate's subject alternative names, or dial a name it has"},
	{[]string{"certificate signed by unknown authority"},
		"the registry's certificate is not signed by a CA of --registry-tls-ca-file (or the system roots when it is empty)"},
	{[]string{"certificate has expired or is not yet valid"},
		"the registry's certificate has expired or is not yet valid: renew it"},
	{[]string{"certificate required", "bad certificate"},
		"the registry requires a client certificate the controller did not present or the registry's --client-ca-file does not trust: set --registry-tls-cert-file and --registry-tls-key-file"},
}

// Diagnose returns the hint for err, or "" when err is not a recognized misconfiguration.
func Diagnose(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	for _, h := range Hints {
		for _, m := range h.Match {
			if strings.Contains(text, m) {
				return h.Text
			}
		}
	}
	return ""
}
