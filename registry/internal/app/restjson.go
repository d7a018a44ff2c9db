package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// compactJSON is the gateway's marshaler with whitespace removed: protojson varies its
// spacing on purpose, and users grep the output (for "state":"LEASE_STATE_ACTIVE"). Its
// decoder names the field a request body got wrong.
type compactJSON struct {
	runtime.JSONPb
}

func (c *compactJSON) Marshal(v any) ([]byte, error) {
	b, err := c.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b, nil
	}
	return buf.Bytes(), nil
}

// NewDecoder returns a decoder that names the field of a body protojson refuses
// (protojson's own error gives a line and column, and for a bad Duration not even the
// field's name). The body is bounded by --max-request-bytes before it gets here.
func (c *compactJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		m, ok := v.(proto.Message)
		if !ok {
			return c.JSONPb.NewDecoder(r).Decode(v)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return io.EOF
		}
		if err := checkJSONCost(b); err != nil {
			return err
		}
		if err := c.UnmarshalOptions.Unmarshal(b, m); err != nil {
			if path := badField(c.UnmarshalOptions, m.ProtoReflect().Descriptor(), b, 0); path != "" {
				return fmt.Errorf("field %s: %w", path, err)
			}
			return err
		}
		return nil
	})
}

// As the gRPC server does for protobuf (server.checkDecodeCost), a JSON body is refused
// before it is decoded when decoding would allocate more than jsonDecodeFactor times its
// size plus jsonDecodeAllowance: each object becomes a Go struct of up to a few hundred
// bytes (jsonObjectCost), each array element or member a slot (jsonElementCost). A body of
// a million `{}` would otherwise cost hundreds of MiB in the gateway.
const (
	jsonDecodeFactor    = 10
	jsonDecodeAllowance = 16 << 20
	jsonObjectCost      = 320
	jsonElementCost     = 32
)

// checkJSONCost scans a JSON body once, counting objects and elements outside strings.
func checkJSONCost(doc []byte) error {
	budget := jsonDecodeFactor*len(doc) + jsonDecodeAllowance
	cost := 0
	_ = scanJSON(doc, func(c byte, quoted bool) error {
		switch {
		case quoted:
		case c == '{':
			cost += jsonObjectCost
		case c == ',':
			cost += jsonElementCost
		}
		return nil
	})
	if cost > budget {
		return fmt.Errorf("decoding the %d-byte body would allocate more than %d bytes (%d× its size + %d MiB); it holds too many small elements: send fewer endpoints or exports per request",
			len(doc), budget, jsonDecodeFactor, jsonDecodeAllowance>>20)
	}
	return nil
}

// maxFieldDepth bounds how deep badField looks into nested messages.
const maxFieldDepth = 8

// badField returns the path (leaseDuration, export.spec.ports[0].port) of the first field
// of doc, a JSON object decoded as md, that protojson refuses; "" when doc is not an object
// or no single field is to blame.
func badField(opts protojson.UnmarshalOptions, md protoreflect.MessageDescriptor, doc []byte, depth int) string {
	var obj map[string]json.RawMessage
	if depth > maxFieldDepth || json.Unmarshal(doc, &obj) != nil {
		return ""
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range obj {
			if !yield(k) {
				return
			}
		}
	}) {
		raw := obj[name]
		fd := md.Fields().ByJSONName(name)
		if fd == nil {
			fd = md.Fields().ByTextName(name)
		}
		if fd == nil {
			continue // unknown fields are discarded
		}
		if sub := fd.Message(); sub != nil && !fd.IsMap() && !strings.HasPrefix(string(sub.FullName()), "google.protobuf.") {
			if fd.IsList() {
				var elems []json.RawMessage
				if json.Unmarshal(raw, &elems) == nil {
					for i, el := range elems {
						if p := badField(opts, sub, el, depth+1); p != "" {
							return name + "[" + strconv.Itoa(i) + "]." + p
						}
					}
				}
			} else if p := badField(opts, sub, raw, depth+1); p != "" {
				return name + "." + p
			}
		}
		one, err := json.Marshal(map[string]json.RawMessage{name: raw})
		if err != nil {
			continue
		}
		if opts.Unmarshal(one, dynamicpb.NewMessage(md)) != nil {
			return name
		}
	}
	return ""
}
