package fleet

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// sharedCodec is the simulated clusters' gRPC codec. It decodes like the default one,
// except that every source cluster's part of an import (ImportCluster) in a watch message
// is decoded once for all simulated clusters: each member cluster of a real fleet holds
// the whole clusterset, so a thousand simulated ones in one process would hold a thousand
// copies of it. The watches still receive, decode the rest of and apply every message
// themselves (importdelta never changes what it is given, so sharing is safe); only equal
// bytes share one object, which lives while a view holds it.
type sharedCodec struct {
	mu    sync.Mutex
	parts map[string]weak.Pointer[registryv1.ImportCluster]
	// received counts the bytes of every watch message, the wire payload the registry sent.
	received atomic.Int64
}

func newSharedCodec() *sharedCodec {
	return &sharedCodec{parts: map[string]weak.Pointer[registryv1.ImportCluster]{}}
}

func (*sharedCodec) Name() string { return "proto" }

func (*sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c *sharedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData() // read, never kept: every part is decoded or copied
	} else {
		b = data.Materialize()
	}
	if w, ok := v.(*registryv1.WatchImportsResponse); ok {
		c.received.Add(int64(len(b)))
		return c.watchMessage(b, w)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal %T: not a protobuf message", v)
	}
	return proto.Unmarshal(b, m)
}

// Field numbers of the watch messages (api/proto/.../registry.proto).
const (
	watchUpserts  = 4 // WatchImportsResponse.upserts: ServiceImport
	watchDeltas   = 6 // WatchImportsResponse.deltas: ImportDelta
	partsOfImport = 3 // ServiceImport.clusters and ImportDelta.clusters: ImportCluster
)

// watchMessage decodes a WatchImportsResponse, taking each ImportCluster from the shared
// parts.
func (c *sharedCodec) watchMessage(b []byte, out *registryv1.WatchImportsResponse) error {
	rest, err := splitFields(b, func(num protowire.Number, val []byte) (bool, error) {
		switch num {
		case watchUpserts:
			imp := &registryv1.ServiceImport{}
			parts, err := c.withParts(val, imp)
			imp.Clusters = parts
			out.Upserts = append(out.Upserts, imp)
			return true, err
		case watchDeltas:
			d := &registryv1.ImportDelta{}
			parts, err := c.withParts(val, d)
			d.Clusters = parts
			out.Deltas = append(out.Deltas, d)
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, out)
}

// withParts decodes an import or a delta into m, but its ImportClusters (field 3), which
// it returns shared.
func (c *sharedCodec) withParts(b []byte, m proto.Message) ([]*registryv1.ImportCluster, error) {
	var parts []*registryv1.ImportCluster
	rest, err := splitFields(b, func(num protowire.Number, val []byte) (bool, error) {
		if num != partsOfImport {
			return false, nil
		}
		p, err := c.part(val)
		parts = append(parts, p)
		return true, err
	})
	if err != nil {
		return nil, err
	}
	return parts, proto.Unmarshal(rest, m)
}

// part returns the ImportCluster these bytes encode, decoded once while any view holds it.
func (c *sharedCodec) part(b []byte) (*registryv1.ImportCluster, error) {
	c.mu.Lock()
	// (Indexing with string(b) copies nothing; only a new part's key is kept.)
	if p := c.parts[string(b)].Value(); p != nil {
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	p := &registryv1.ImportCluster{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.parts[string(b)].Value(); q != nil {
		return q, nil
	}
	key := string(b)
	wp := weak.Make(p)
	c.parts[key] = wp
	runtime.AddCleanup(p, func(key string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.parts[key] == wp {
			delete(c.parts, key)
		}
	}, key)
	return p, nil
}

// splitFields walks a message's fields, gives each length-delimited one to take, and
// returns the bytes of the fields take did not take.
func splitFields(b []byte, take func(protowire.Number, []byte) (bool, error)) ([]byte, error) {
	rest := make([]byte, 0, 64)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		field := b[:n+m]
		if typ == protowire.BytesType {
			val, _ := protowire.ConsumeBytes(b[n:])
			took, err := take(num, val)
			if err != nil {
				return nil, err
			}
			if took {
				b = b[n+m:]
				continue
			}
		}
		rest = append(rest, field...)
		b = b[n+m:]
	}
	return rest, nil
}
