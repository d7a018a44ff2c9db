// Package registryrest reads and administers a running registry through its REST port, for
// mcs-admin: it works with every store (the memory store lives only inside the registry
// process) and, with a client certificate, through the registry's authorization.
package registryrest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// maxResponseBytes bounds a response body; a clusterset with a million endpoints is ~100 MiB.
const maxResponseBytes = 512 << 20

// Options configure a Client.
type Options struct {
	// URL is the registry's REST address, such as https://mcs-registry.example.internal:8080.
	URL string
	// CAFile verifies the registry's certificate; empty: the system roots.
	CAFile string
	// CertFile and KeyFile are a client certificate, for a registry with --client-ca-file.
	CertFile, KeyFile string
	// Timeout bounds each request; 0: 30 s.
	Timeout time.Duration
}

// Client calls one registry's REST API.
type Client struct {
	base string
	http *http.Client
	// tlsWithoutCert: https without a client certificate, for a hint on refused connections.
	tlsWithoutCert bool
}

// New checks the options and returns a Client. Nothing is dialled yet.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--registry-rest-url %q: must be like https://mcs-registry.example.internal:8080 (the registry's REST port)", opts.URL)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("--registry-rest-url %q: must have no path or query", opts.URL)
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("--registry-tls-cert-file and --registry-tls-key-file: give both or neither")
	}
	if u.Scheme == "http" && (opts.CAFile != "" || opts.CertFile != "") {
		return nil, fmt.Errorf("--registry-rest-url %q: TLS files are given but the URL is http://; use https://", opts.URL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if opts.CAFile != "" {
			pool, err := pemfile.CertPool(opts.CAFile)
			if err != nil {
				return nil, fmt.Errorf("--registry-tls-ca-file: %w", err)
			}
			cfg.RootCAs = pool
		}
		if opts.CertFile != "" {
			kp, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("--registry-tls-cert-file/--registry-tls-key-file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		tr.TLSClientConfig = cfg
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	return &Client{
		base: strings.TrimSuffix(u.String(), "/"), http: &http.Client{Transport: tr, Timeout: timeout},
		tlsWithoutCert: u.Scheme == "https" && opts.CertFile == "",
	}, nil
}

// Error is a refusal by the registry: its gRPC status as the REST port writes it.
type Error struct {
	HTTPStatus int
	// Code is the gRPC code number (3 INVALID_ARGUMENT, 5 NOT_FOUND, 7 PERMISSION_DENIED...).
	Code    int
	Message string
	// Reason is the ErrorInfo reason, when the registry sent one.
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("registry answered HTTP %d: %s", e.HTTPStatus, e.Message)
}

// unknownClusterset reports the registry's refusal of a clusterset with no registered cluster.
func unknownClusterset(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String()
}

func (c *Client) do(ctx context.Context, method, path string, out proto.Message) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if c.tlsWithoutCert {
			// With TLS 1.3 a refused client shows as a reset or an alert, depending on timing.
			return fmt.Errorf("%s %s: %w (a registry with --client-ca-file needs --registry-tls-cert-file and --registry-tls-key-file)", method, c.base+path, err)
		}
		return fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", method, c.base+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(resp.StatusCode, body)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decoding the response: %w", method, c.base+path, err)
	}
	return nil
}

func statusError(httpStatus int, body []byte) error {
	var st struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	}
	e := &Error{HTTPStatus: httpStatus}
	if json.Unmarshal(body, &st) != nil || st.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
		return e
	}
	e.Code, e.Message = st.Code, st.Message
	for _, d := range st.Details {
		if d.Reason != "" {
			e.Reason = d.Reason
		}
	}
	return e
}

func clustersetPath(clusterset string) string {
	return "/v1/clustersets/" + url.PathEscape(clusterset)
}

// ListClusters returns the clusterset's clusters; none when the registry knows no cluster of it.
func (c *Client) ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error) {
	var resp registryv1.ListClustersResponse
	if err := c.do(ctx, http.MethodGet, clustersetPath(clusterset)+"/clusters", &resp); err != nil {
		if unknownClusterset(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]store.Cluster, 0, len(resp.GetClusters()))
	for _, cl := range resp.GetClusters() {
		out = append(out, store.Cluster{
			Clusterset: cl.GetClusterset(), ClusterID: cl.GetClusterId(), Region: cl.GetRegion(),
			LeaseDuration: cl.GetLease().GetDuration().AsDuration(),
			RegisterTime:  cl.GetRegisterTime().AsTime(), RenewTime: cl.GetLease().GetRenewTime().AsTime(),
		})
	}
	return out, nil
}

// ListExports returns the clusterset's exports with their endpoints.
func (c *Client) ListExports(ctx context.Context, clusterset string) ([]store.Export, error) {
	var resp registryv1.ListExportsResponse
	if err := c.do(ctx, http.MethodGet, clustersetPath(clusterset)+"/exports?includeEndpoints=true", &resp); err != nil {
		if unknownClusterset(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]store.Export, 0, len(resp.GetExports()))
	for _, e := range resp.GetExports() {
		out = append(out, store.Export{
			Clusterset: e.GetClusterset(), ClusterID: e.GetClusterId(),
			Service: store.ServiceKey{Namespace: e.GetService().GetNamespace(), Name: e.GetService().GetName()},
			Spec:    e.GetSpec(), EndpointGroups: e.GetEndpointGroups(),
			CreateTime: e.GetCreateTime().AsTime(), UpdateTime: e.GetUpdateTime().AsTime(),
		})
	}
	return out, nil
}

// ListUnreadable returns the clusterset's stored items the registry cannot read.
func (c *Client) ListUnreadable(ctx context.Context, clusterset string) ([]store.Unreadable, error) {
	var resp registryv1.ListExportsResponse
	if err := c.do(ctx, http.MethodGet, clustersetPath(clusterset)+"/exports", &resp); err != nil {
		if unknownClusterset(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]store.Unreadable, 0, len(resp.GetUnreadable()))
	for _, u := range resp.GetUnreadable() {
		out = append(out, store.Unreadable{Clusterset: clusterset, Key: u.GetKey(), ClusterID: u.GetClusterId(),
			Service: store.ServiceKey{Namespace: u.GetService().GetNamespace(), Name: u.GetService().GetName()}, Reason: u.GetReason()})
	}
	return out, nil
}

// DeleteExport removes one cluster's export of a Service (also one that cannot be read)
// and reports whether it existed.
func (c *Client) DeleteExport(ctx context.Context, k store.ClusterKey, svc store.ServiceKey) (bool, error) {
	var resp registryv1.DeleteExportResponse
	path := clustersetPath(k.Clusterset) + "/clusters/" + url.PathEscape(k.ClusterID) + "/exports/" + url.PathEscape(svc.Namespace) + "/" + url.PathEscape(svc.Name)
	if err := c.do(ctx, http.MethodDelete, path, &resp); err != nil {
		return false, err
	}
	return resp.GetDeleted(), nil
}

// DeleteCluster removes a cluster with its exports and returns how many exports went;
// store.ErrClusterNotFound when the registry does not know it.
func (c *Client) DeleteCluster(ctx context.Context, k store.ClusterKey) (int, error) {
	var resp registryv1.DeleteClusterResponse
	err := c.do(ctx, http.MethodDelete, clustersetPath(k.Clusterset)+"/clusters/"+url.PathEscape(k.ClusterID), &resp)
	var e *Error
	if errors.As(err, &e) && e.HTTPStatus == http.StatusNotFound {
		return 0, fmt.Errorf("%s: %w", e.Message, store.ErrClusterNotFound)
	}
	if err != nil {
		return 0, err
	}
	return int(resp.GetDeletedExports()), nil
}
