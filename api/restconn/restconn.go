// Package restconn lets the generated gRPC client of the registry API call the registry's
// REST port: Conn is a grpc.ClientConnInterface that turns each unary call into the HTTP
// request registry_http.yaml maps it to (the file grpc-gateway serves the REST port from)
// and the JSON answer, or the google.rpc.Status of a refusal, back into the call's result.
//
//	conn, err := restconn.New("https://mcs-registry:8080", httpClient, restconn.Options{})
//	client := registryv1.NewRegistryServiceClient(conn)
//	resp, err := client.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "prod"})
//
// So a REST client has no route, field name or error shape of its own to keep in step with
// the API: a refusal is a gRPC status error with its details, as over the gRPC port.
// Streaming calls (WatchImports) are not served over REST by this package.
package restconn

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	_ "google.golang.org/genproto/googleapis/rpc/errdetails" // the detail types a refusal carries
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/api"
)

// DefaultMaxResponseBytes bounds a response body when Options leave it 0.
const DefaultMaxResponseBytes = 512 << 20

// Rule is one method's HTTP mapping.
type Rule struct {
	Method string // GET, POST, PUT, DELETE
	Path   string // a template such as /v1/clustersets/{clusterset}/clusters
	Body   string // "*" when the request is the body; empty when it goes in the query
}

type ruleFile struct {
	HTTP struct {
		Rules []struct {
			Selector string `json:"selector"`
			Get      string `json:"get"`
			Post     string `json:"post"`
			Put      string `json:"put"`
			Delete   string `json:"delete"`
			Patch    string `json:"patch"`
			Body     string `json:"body"`
		} `json:"rules"`
	} `json:"http"`
}

// Rules returns the API's HTTP mapping by full gRPC method name (/package.Service/Method),
// read from registry_http.yaml.
func Rules() (map[string]Rule, error) {
	return parseRules(api.RegistryHTTPRules)
}

func parseRules(data []byte) (map[string]Rule, error) {
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("registry_http.yaml: %w", err)
	}
	out := map[string]Rule{}
	for _, r := range f.HTTP.Rules {
		i := strings.LastIndex(r.Selector, ".")
		if i < 0 {
			return nil, fmt.Errorf("registry_http.yaml: selector %q is not Service.Method", r.Selector)
		}
		rule := Rule{Body: r.Body}
		for method, path := range map[string]string{http.MethodGet: r.Get, http.MethodPost: r.Post, http.MethodPut: r.Put, http.MethodDelete: r.Delete, http.MethodPatch: r.Patch} {
			if path != "" {
				rule.Method, rule.Path = method, path
			}
		}
		if rule.Method == "" {
			return nil, fmt.Errorf("registry_http.yaml: %s has no path", r.Selector)
		}
		out["/"+r.Selector[:i]+"/"+r.Selector[i+1:]] = rule
	}
	return out, nil
}

// Options configure a Conn.
type Options struct {
	// MaxResponseBytes bounds a response body; 0: DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Conn calls the registry's REST port. It is safe for concurrent use.
type Conn struct {
	base  string
	http  *http.Client
	max   int64
	rules map[string]Rule
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

// New returns a Conn to the REST port at base (scheme://host:port) through client.
func New(base string, client *http.Client, opts Options) (*Conn, error) {
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	rules, err := Rules()
	if err != nil {
		return nil, err
	}
	return &Conn{base: strings.TrimSuffix(base, "/"), http: client, max: opts.MaxResponseBytes, rules: rules}, nil
}

// Invoke sends one unary call as its HTTP request. A transport failure is returned as is
// (wrapped with the request); an HTTP refusal as a *Refusal, a gRPC status error.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	req, ok := args.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: the request is not a protobuf message", method)
	}
	resp, ok := reply.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: the reply is not a protobuf message", method)
	}
	rule, ok := c.rules[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "%s has no HTTP mapping", method)
	}
	path, used, err := expand(rule.Path, req.ProtoReflect())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: %v", method, err)
	}
	var body io.Reader
	if rule.Body == "*" {
		data, err := protojson.Marshal(req)
		if err != nil {
			return status.Errorf(codes.Internal, "%s: encoding the request: %v", method, err)
		}
		body = bytes.NewReader(data)
	} else if q := query(req.ProtoReflect(), "", used); len(q) > 0 {
		path += "?" + q.Encode()
	}
	hreq, err := http.NewRequestWithContext(ctx, rule.Method, c.base+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("%s %s: %w", rule.Method, c.base+path, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, c.max+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", rule.Method, c.base+path, err)
	}
	if int64(len(data)) > c.max {
		return status.Errorf(codes.ResourceExhausted, "%s %s: the response is larger than %d bytes", rule.Method, c.base+path, c.max)
	}
	if hresp.StatusCode != http.StatusOK {
		return refusal(hresp.StatusCode, data)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, resp); err != nil {
		return status.Errorf(codes.Internal, "%s %s: decoding the response: %v", rule.Method, c.base+path, err)
	}
	return nil
}

// NewStream refuses: the REST port serves streams as newline-delimited JSON, which this
// package does not read.
func (c *Conn) NewStream(_ context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s: streaming calls are not served over REST by restconn; use the gRPC port", method)
}

// expand fills the path template's {field.path} segments from the request and returns the
// fields it used (they stay out of the query).
func expand(tmpl string, m protoreflect.Message) (string, map[string]bool, error) {
	used := map[string]bool{}
	var b strings.Builder
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(tmpl)
			return b.String(), used, nil
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			return "", nil, fmt.Errorf("path template %q is not closed", tmpl)
		}
		b.WriteString(tmpl[:open])
		field := tmpl[open+1 : open+end]
		v, err := fieldValue(m, field)
		if err != nil {
			return "", nil, err
		}
		if v == "" {
			return "", nil, fmt.Errorf("%s is required (it is part of the path)", field)
		}
		b.WriteString(url.PathEscape(v))
		used[field] = true
		tmpl = tmpl[open+end+1:]
	}
}

// fieldValue reads a scalar field by its dotted proto name, such as service.namespace.
func fieldValue(m protoreflect.Message, dotted string) (string, error) {
	parts := strings.Split(dotted, ".")
	for i, name := range parts {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return "", fmt.Errorf("%s has no field %q", m.Descriptor().FullName(), name)
		}
		if i < len(parts)-1 {
			if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
				return "", fmt.Errorf("%s: %q is not a message", dotted, name)
			}
			m = m.Get(fd).Message()
			continue
		}
		if fd.IsList() || fd.IsMap() || fd.Kind() == protoreflect.MessageKind {
			return "", fmt.Errorf("%s is not a scalar", dotted)
		}
		return fmt.Sprint(m.Get(fd).Interface()), nil
	}
	return "", fmt.Errorf("empty field path")
}

// query encodes the set fields not in the path as grpc-gateway reads them: the JSON name,
// dotted for nested messages, repeated for lists.
func query(m protoreflect.Message, prefix string, used map[string]bool) url.Values {
	q := url.Values{}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		protoPath := prefix + string(fd.Name())
		if used[protoPath] || fd.IsMap() {
			return true
		}
		key := protoPath // grpc-gateway reads proto and JSON names alike
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if fd.Kind() != protoreflect.MessageKind {
					q.Add(key, scalar(fd, l.Get(i)))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			for k, vs := range query(v.Message(), protoPath+".", used) {
				q[k] = append(q[k], vs...)
			}
		default:
			q.Set(key, scalar(fd, v))
		}
		return true
	})
	return q
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if fd.Kind() == protoreflect.EnumKind {
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
	}
	return fmt.Sprint(v.Interface())
}

// Refusal is an HTTP error answer of the registry: the gRPC status it carries (status.FromError
// and status.Code read it) and the HTTP status it came with.
type Refusal struct {
	HTTPStatus int
	Status     *status.Status
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("HTTP %d: %s: %s", r.HTTPStatus, r.Status.Code(), r.Status.Message())
}

// GRPCStatus makes the refusal a gRPC status error.
func (r *Refusal) GRPCStatus() *status.Status { return r.Status }

// refusal reads the google.rpc.Status grpc-gateway writes as JSON, or makes one from the
// HTTP status when the body is not one (a proxy's answer, for example).
func refusal(httpStatus int, body []byte) error {
	var st spb.Status
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &st); err == nil && st.GetMessage() != "" {
		return &Refusal{HTTPStatus: httpStatus, Status: status.FromProto(&st)}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return &Refusal{HTTPStatus: httpStatus, Status: status.New(codeOf(httpStatus), msg)}
}

// codeOf is the gRPC code for an HTTP status without a google.rpc.Status body (a proxy's
// answer, for example).
func codeOf(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.Aborted
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codes.Unavailable
	default:
		return codes.Unknown
	}
}
