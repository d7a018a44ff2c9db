package diagnose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// RegistryOptions say how to reach the registry's REST port.
type RegistryOptions struct {
	URL                       string
	CAFile, CertFile, KeyFile string
}

// registryView is what the registry said, for the clusters' checks.
type registryView struct {
	clusters map[string]*registryv1.Cluster
	version  string
	err      error
}

// certificateWarning is how long before its expiry a certificate is reported.
const certificateWarning = 14 * 24 * time.Hour

// maxClockSkew is the clock difference reported as a warning: leases and the registry's
// lease judgement compare times written by different machines.
const maxClockSkew = 2 * time.Second

// checkRegistry reads the clusterset's clusters from the registry and checks its
// certificate and clock.
func checkRegistry(ctx context.Context, o RegistryOptions, clusterset string, now func() time.Time) ([]Result, registryView) {
	res := func(check string, s Status, detail, fix string) Result {
		return Result{Target: "registry", Check: check, Status: s, Detail: detail, Fix: fix}
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return []Result{res("connection", Fail, err.Error(), "--registry-tls-ca-file must name a readable PEM file")}, registryView{err: err}
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
			return []Result{res("connection", Fail, o.CAFile+" holds no PEM certificate", "give the CA that signed the registry's certificate")}, registryView{err: fmt.Errorf("no CA in %s", o.CAFile)}
		}
	}
	if o.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return []Result{res("connection", Fail, err.Error(), "--registry-tls-cert-file and --registry-tls-key-file must be a key pair")}, registryView{err: err}
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	u := strings.TrimSuffix(o.URL, "/") + "/v1/clustersets/" + url.PathEscape(clusterset) + "/clusters"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return []Result{res("connection", Fail, err.Error(), "--registry-rest-url must be http(s)://host:port")}, registryView{err: err}
	}
	sent := now()
	resp, err := hc.Do(req)
	if err != nil {
		fix := "check the URL (the registry's REST port, 8080 by default) and the network path"
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) || strings.Contains(err.Error(), "certificate") {
			fix = "--registry-tls-ca-file must be the CA that signed the registry's certificate (the controllers' controller.registryCA the same)"
		}
		return []Result{res("connection", Fail, err.Error(), fix)}, registryView{err: err}
	}
	defer resp.Body.Close()
	received := now()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return []Result{res("connection", Fail, err.Error(), "retry; the registry closed the connection")}, registryView{err: err}
	}
	var out []Result
	out = append(out, certificateResult(resp.TLS, now()))
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		out = append(out, clockResult("registry", d, sent, received))
	}
	view := registryView{clusters: map[string]*registryv1.Cluster{}}
	switch {
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "CLUSTERSET_UNKNOWN"):
		out = append(out, res("connection", Fail, fmt.Sprintf("the registry holds no cluster of clusterset %q", clusterset),
			"check --clusterset-id; a memory-store registry that restarted is empty until the controllers register again"))
	case resp.StatusCode != http.StatusOK:
		view.err = fmt.Errorf("HTTP %d", resp.StatusCode)
		out = append(out, res("connection", Fail, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body))),
			"a 401 or 403 needs --registry-tls-cert-file and --registry-tls-key-file of an admin or member identity"))
	default:
		var lc registryv1.ListClustersResponse
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &lc); err != nil {
			view.err = err
			out = append(out, res("connection", Fail, "unreadable answer: "+err.Error(), "--registry-rest-url must be the registry's REST port"))
			break
		}
		for _, c := range lc.GetClusters() {
			view.clusters[c.GetClusterId()] = c
		}
		view.version = lc.GetRegistryVersion()
		detail := fmt.Sprintf("%d cluster(s) registered", len(lc.GetClusters()))
		if lc.GetRegion() != "" {
			detail += " (replica in " + lc.GetRegion() + ")"
		}
		if v := lc.GetRegistryVersion(); v != "" {
			detail += ", version " + v
		}
		out = append(out, res("connection", OK, detail, ""))
	}
	return out, view
}

// certificateResult checks the registry's serving certificate; plaintext is a warning.
func certificateResult(st *tls.ConnectionState, now time.Time) Result {
	r := Result{Target: "registry", Check: "certificate"}
	if st == nil || len(st.PeerCertificates) == 0 {
		r.Status, r.Detail = Warn, "plaintext: no TLS"
		r.Fix = "serve TLS (registry.tls.secretName) outside an evaluation"
		return r
	}
	return expiryResult(r, st.PeerCertificates[0], now, "renew the registry's certificate (cert-manager: kubectl describe certificate); the registry reloads it without a restart")
}

func expiryResult(r Result, c *x509.Certificate, now time.Time, fix string) Result {
	left := c.NotAfter.Sub(now)
	r.Detail = fmt.Sprintf("%s expires %s (in %s)", c.Subject.String(), c.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Hour))
	switch {
	case left <= 0:
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s expired %s", c.Subject.String(), c.NotAfter.UTC().Format(time.RFC3339)), fix
	case left < certificateWarning:
		r.Status, r.Fix = Warn, fix
	default:
		r.Status = OK
	}
	return r
}

// clockResult compares a server's Date header with this machine's clock, read before and
// after the request: the header has a resolution of one second.
func clockResult(target string, date, sent, received time.Time) Result {
	r := Result{Target: target, Check: "clock"}
	mid := sent.Add(received.Sub(sent) / 2)
	skew := date.Sub(mid.Truncate(time.Second))
	if skew < 0 {
		skew = -skew
	}
	// The header's second may have started up to a second before mid.
	skew = max(skew-time.Second, 0)
	r.Detail = fmt.Sprintf("%s from this machine's clock (±1 s)", skew.Round(time.Second))
	if skew > maxClockSkew {
		r.Status, r.Fix = Warn, "run NTP (chrony) on the nodes; leases compare times of different machines"
	} else {
		r.Status = OK
	}
	return r
}
