// Package registryrest reads and administers a running registry through its REST port, for
// mcs-admin: it works with every store (the memory store lives only inside the registry
// process) and, with a client certificate, through the registry's authorization.
package registryrest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
	"github.com/ai-dynamo/global-discovery-mcs/api/restconn"
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

// Client calls one registry's REST port with the generated client of the registry API
// (api/restconn maps each call to its route, as the REST port's own gateway does).
type Client struct {
	base string
	rpc  registryv1.RegistryServiceClient
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
	base := strings.TrimSuffix(u.String(), "/")
	conn, err := restconn.New(base, &http.Client{Transport: tr, Timeout: timeout}, restconn.Options{MaxResponseBytes: maxResponseBytes})
	if err != nil {
		return nil, err
	}
	return &Client{
		base: base, rpc: registryv1.NewRegistryServiceClient(conn),
		tlsWithoutCert: u.Scheme == "https" && opts.CertFile == "",
	}, nil
}

// Error is a refusal by the registry: its gRPC status as the REST port writes it.
type Error struct {
	HTTPStatus int
	// Code is the gRPC code (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED...).
	Code    codes.Code
	Message string
	// Reason is the ErrorInfo reason, when the registry sent one.
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("registry answered HTTP %d: %s", e.HTTPStatus, e.Message)
}

// call names a failed call's error: a refusal as an *Error, a transport failure with the
// hint a TLS registry that wants a client certificate needs.
func (c *Client) call(err error) error {
	if err == nil {
		return nil
	}
	var r *restconn.Refusal
	if errors.As(err, &r) {
		e := &Error{HTTPStatus: r.HTTPStatus, Code: r.Status.Code(), Message: r.Status.Message()}
		for _, d := range r.Status.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
				e.Reason = info.GetReason()
			}
		}
		return e
	}
	if c.tlsWithoutCert && status.Code(err) == codes.Unknown {
		// With TLS 1.3 a refused client shows as a reset or an alert, depending on timing.
		return fmt.Errorf("%w (a registry with --client-ca-file needs --registry-tls-cert-file and --registry-tls-key-file)", err)
	}
	return err
}

// unknownClusterset reports the registry's refusal of a clusterset with no registered cluster.
func unknownClusterset(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String()
}

func serviceKey(s *registryv1.ServiceKey) store.ServiceKey {
	return store.ServiceKey{Namespace: s.GetNamespace(), Name: s.GetName()}
}

// ListClusters returns the clusterset's clusters; none when the registry knows no cluster of it.
func (c *Client) ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error) {
	resp, err := c.rpc.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: clusterset})
	if err = c.call(err); err != nil {
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
			RenewRegion: cl.GetLease().GetRenewRegion(),
		})
	}
	return out, nil
}

// LeaseView is the answering registry replica's view of a clusterset's leases.
type LeaseView struct {
	// Region is the replica's region; empty with the memory store.
	Region string
	// States are the lease states by cluster id, as the replica judges them (held ones
	// included).
	States map[string]registryv1.LeaseState
	// Lags is the replication lag the replica measures, by source region.
	Lags map[string]time.Duration
}

// LeaseView returns the registry's view of the clusterset's leases; an empty one when the
// registry knows no cluster of it.
func (c *Client) LeaseView(ctx context.Context, clusterset string) (LeaseView, error) {
	v := LeaseView{States: map[string]registryv1.LeaseState{}, Lags: map[string]time.Duration{}}
	resp, err := c.rpc.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: clusterset})
	if err = c.call(err); err != nil {
		if unknownClusterset(err) {
			return v, nil
		}
		return v, err
	}
	v.Region = resp.GetRegion()
	for _, cl := range resp.GetClusters() {
		v.States[cl.GetClusterId()] = cl.GetLease().GetState()
	}
	for _, l := range resp.GetReplicationLags() {
		v.Lags[l.GetSourceRegion()] = l.GetLag().AsDuration()
	}
	return v, nil
}

// ListExports returns the clusterset's exports with their endpoints.
func (c *Client) ListExports(ctx context.Context, clusterset string) ([]store.Export, error) {
	resp, err := c.rpc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: clusterset, IncludeEndpoints: true})
	if err = c.call(err); err != nil {
		if unknownClusterset(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]store.Export, 0, len(resp.GetExports()))
	for _, e := range resp.GetExports() {
		out = append(out, store.Export{
			Clusterset: e.GetClusterset(), ClusterID: e.GetClusterId(), Service: serviceKey(e.GetService()),
			Spec: e.GetSpec(), EndpointGroups: e.GetEndpointGroups(),
			CreateTime: e.GetCreateTime().AsTime(), UpdateTime: e.GetUpdateTime().AsTime(),
		})
	}
	return out, nil
}

// ListUnreadable returns the clusterset's stored items the registry cannot read.
func (c *Client) ListUnreadable(ctx context.Context, clusterset string) ([]store.Unreadable, error) {
	resp, err := c.rpc.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: clusterset})
	if err = c.call(err); err != nil {
		if unknownClusterset(err) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]store.Unreadable, 0, len(resp.GetUnreadable()))
	for _, u := range resp.GetUnreadable() {
		out = append(out, store.Unreadable{Clusterset: clusterset, Key: u.GetKey(), ClusterID: u.GetClusterId(),
			Service: serviceKey(u.GetService()), Reason: u.GetReason()})
	}
	return out, nil
}

// DeleteExport removes one cluster's export of a Service (also one that cannot be read)
// and reports whether it existed.
func (c *Client) DeleteExport(ctx context.Context, k store.ClusterKey, svc store.ServiceKey) (bool, error) {
	resp, err := c.rpc.DeleteExport(ctx, &registryv1.DeleteExportRequest{
		Clusterset: k.Clusterset, ClusterId: k.ClusterID,
		Service: &registryv1.ServiceKey{Namespace: svc.Namespace, Name: svc.Name},
	})
	if err = c.call(err); err != nil {
		return false, err
	}
	return resp.GetDeleted(), nil
}

// DeleteCluster removes a cluster with its exports and returns how many exports went;
// store.ErrClusterNotFound when the registry does not know it.
func (c *Client) DeleteCluster(ctx context.Context, k store.ClusterKey) (int, error) {
	resp, err := c.rpc.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: k.Clusterset, ClusterId: k.ClusterID})
	err = c.call(err)
	var e *Error
	if errors.As(err, &e) && e.Code == codes.NotFound {
		return 0, fmt.Errorf("%s: %w", e.Message, store.ErrClusterNotFound)
	}
	if err != nil {
		return 0, err
	}
	return int(resp.GetDeletedExports()), nil
}
