package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// exportFrom decodes an export item, reading its chunks when it has them.
func (st *Store) exportFrom(ctx context.Context, clusterset string, item map[string]types.AttributeValue) (store.Export, error) {
	ek, err := exportKeyFrom(item)
	if err != nil {
		return store.Export{}, err
	}
	e := store.Export{
		Clusterset: clusterset, ClusterID: ek.ClusterID, Service: ek.Service,
		CreateTime: fromMs(getN(item, "createMs")), UpdateTime: fromMs(getN(item, "updateMs")), Spec: &registryv1.ExportSpec{},
	}
	if err := proto.Unmarshal(getB(item, "spec"), e.Spec); err != nil {
		return e, fmt.Errorf("decode export spec of %s from %s: %w: %w", ek.Service, ek.ClusterID, errBadItem, err)
	}
	if gen := getS(item, "gen"); gen != "" {
		groups, err := st.readChunks(ctx, clusterset, ek, item)
		if err != nil {
			return e, err
		}
		e.EndpointGroups = groups
		return e, nil
	}
	groups, err := unmarshalGroups(getB(item, "eps"))
	if err != nil {
		return e, fmt.Errorf("decode endpoints of %s from %s: %w: %w", ek.Service, ek.ClusterID, errBadItem, err)
	}
	e.EndpointGroups = groups
	return e, nil
}

// maxChunks bounds the endpoint chunks an export item may name: far more than any write
// makes (chunks hold up to 350 KiB; a request is bounded by --max-request-bytes), so a
// count past it is damage, not data.
const maxChunks = 4096

// readChunks reads the endpoint chunks an export item names. Chunks that are missing, extra
// or undecodable make the export a bad item (every reader skips it, on every replica and
// after every restart: a full read and the change feed apply this one rule); chunks that
// changed because a write replaced the export while they were read are errConcurrentWrite.
func (st *Store) readChunks(ctx context.Context, clusterset string, ek exportKey, item map[string]types.AttributeValue) ([]*registryv1.EndpointGroup, error) {
	gen, want := getS(item, "gen"), getN(item, "chunks")
	if want < 1 || want > maxChunks {
		return nil, fmt.Errorf("export %s from %s: names %d endpoint chunks, 1 to %d allowed: %w", ek.Service, ek.ClusterID, want, maxChunks, errBadItem)
	}
	// Every generation's chunks: those of the generation the item names are the
	// endpoints; old ones that a failed delete left behind are swept.
	all, err := st.query(ctx, clusterset, chunksOf(ek.Service, ek.ClusterID))
	if err != nil {
		return nil, err
	}
	parts, orphans := st.chunksOfGen(all, gen)
	st.sweepChunks(ctx, clusterset, orphans)
	type chunk struct {
		n    int
		data []byte
	}
	ordered := make([]chunk, 0, len(parts))
	for _, p := range parts {
		n, err := chunkIndex(p)
		if err != nil {
			return nil, fmt.Errorf("export %s from %s: %w", ek.Service, ek.ClusterID, err)
		}
		ordered = append(ordered, chunk{n, getB(p, "data")})
	}
	sort.Slice(ordered, func(a, b int) bool { return ordered[a].n < ordered[b].n })
	whole := len(ordered) == int(want)
	for i, c := range ordered {
		whole = whole && c.n == i
	}
	if !whole {
		// A write that replaced the export removes the old chunks after writing the new
		// item: the item as it is now tells a concurrent write from chunks that are gone.
		now, err := st.getExportItem(ctx, clusterset, ek.Service, ek.ClusterID)
		if err != nil {
			return nil, err
		}
		if now == nil || getS(now, "gen") != gen || getN(now, "writeUs") != getN(item, "writeUs") {
			return nil, fmt.Errorf("export %s from %s: %w", ek.Service, ek.ClusterID, errConcurrentWrite)
		}
		return nil, fmt.Errorf("export %s from %s: %d of %d endpoint chunks (generation %s, indexes 0 to %d) stored: %w",
			ek.Service, ek.ClusterID, len(ordered), want, gen, want-1, errBadItem)
	}
	var groups []*registryv1.EndpointGroup
	for _, c := range ordered {
		g, err := unmarshalGroups(c.data)
		if err != nil {
			return nil, fmt.Errorf("decode endpoint chunk %d of %s from %s: %w: %w", c.n, ek.Service, ek.ClusterID, errBadItem, err)
		}
		groups = appendMerged(groups, g)
	}
	return groups, nil
}

// errConcurrentWrite is transient: a retry reads the export whole.
var errConcurrentWrite = fmt.Errorf("the export changed while it was read: %w", store.ErrUnavailable)

// appendMerged appends chunked groups, joining a group that was split across chunks.
func appendMerged(dst, src []*registryv1.EndpointGroup) []*registryv1.EndpointGroup {
	for i, g := range src {
		if i == 0 && len(dst) > 0 {
			last := dst[len(dst)-1]
			if last.GetAddressType() == g.GetAddressType() && slices.EqualFunc(last.GetPorts(), g.GetPorts(), func(x, y *registryv1.EndpointPort) bool { return proto.Equal(x, y) }) {
				last.Endpoints = append(last.Endpoints, g.GetEndpoints()...)
				continue
			}
		}
		dst = append(dst, g)
	}
	return dst
}

// listExports reads exports with a sort-key prefix, retrying when a large export changed
// while its chunks were read. An export that cannot be read is skipped and reported.
func (st *Store) listExports(ctx context.Context, clusterset, prefix string) ([]store.Export, error) {
	out, bad, err := st.readExports(ctx, clusterset, st.prefixItems(clusterset, prefix))
	for _, b := range bad {
		st.badItem(pk(clusterset), b.Key, errors.New(b.Reason))
	}
	return out, err
}

// prefixItems reads the export items whose sort key starts with prefix.
func (st *Store) prefixItems(clusterset, prefix string) func(context.Context) ([]map[string]types.AttributeValue, error) {
	return func(ctx context.Context) ([]map[string]types.AttributeValue, error) {
		return st.query(ctx, clusterset, prefix)
	}
}

// readExports decodes the export items read: those it can decode, and those it cannot
// (bad items); it reads them again when a large export changed while its chunks were read.
func (st *Store) readExports(ctx context.Context, clusterset string, read func(context.Context) ([]map[string]types.AttributeValue, error)) ([]store.Export, []store.Unreadable, error) {
	for attempt := 0; ; attempt++ {
		items, err := read(ctx)
		if err != nil {
			return nil, nil, err
		}
		out := make([]store.Export, 0, len(items))
		var bad []store.Unreadable
		retry := false
		for _, it := range items {
			e, err := st.exportFrom(ctx, clusterset, it)
			if errors.Is(err, errConcurrentWrite) && attempt < 5 {
				retry = true
				break
			}
			if errors.Is(err, errBadItem) {
				bad = append(bad, unreadable(clusterset, getS(it, attrSK), err))
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			out = append(out, e)
		}
		if !retry {
			sort.Slice(out, func(i, j int) bool {
				if out[i].Service != out[j].Service {
					return out[i].Service.Less(out[j].Service)
				}
				return out[i].ClusterID < out[j].ClusterID
			})
			return out, bad, nil
		}
	}
}

// unreadable describes a bad item, naming its export when its key can be read.
func unreadable(clusterset, sk string, err error) store.Unreadable {
	u := store.Unreadable{Clusterset: clusterset, Key: sk, Reason: err.Error()}
	if ek, kerr := parseExportSK(sk); kerr == nil {
		u.ClusterID, u.Service = ek.ClusterID, ek.Service
	} else if id, ok := strings.CutPrefix(sk, "CLUSTER#"); ok {
		u.ClusterID = id
	}
	return u
}

// ListUnreadable implements store.Store: it reads the clusterset's cluster and export items
// whole and lists those it cannot decode.
func (st *Store) ListUnreadable(ctx context.Context, clusterset string) ([]store.Unreadable, error) {
	items, err := st.query(ctx, clusterset, "CLUSTER#")
	if err != nil {
		return nil, err
	}
	var bad []store.Unreadable
	for _, it := range items {
		if _, err := clusterFrom(clusterset, it); err != nil {
			bad = append(bad, unreadable(clusterset, getS(it, attrSK), err))
		}
	}
	_, badExports, err := st.readExports(ctx, clusterset, st.prefixItems(clusterset, "EXPORT#"))
	if err != nil {
		return nil, err
	}
	bad = append(bad, badExports...)
	for _, b := range bad {
		st.badItem(pk(clusterset), b.Key, errors.New(b.Reason))
	}
	return bad, nil
}

// ListExports implements store.Store.
func (st *Store) ListExports(ctx context.Context, clusterset string) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, "EXPORT#")
}

// ListClusterExports implements store.Store: it reads the cluster's export items through
// its keys (clusterkeys.go), so what it reads grows with the cluster's exports alone.
func (st *Store) ListClusterExports(ctx context.Context, key store.ClusterKey) ([]store.Export, []store.Unreadable, error) {
	out, bad, err := st.readExports(ctx, key.Clusterset, func(ctx context.Context) ([]map[string]types.AttributeValue, error) {
		return st.clusterItems(ctx, key, "", nil)
	})
	for _, b := range bad {
		st.badItem(pk(key.Clusterset), b.Key, errors.New(b.Reason))
	}
	return out, bad, err
}

// ListServiceExports implements store.Store.
func (st *Store) ListServiceExports(ctx context.Context, clusterset string, svc store.ServiceKey) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, exportPrefix(svc))
}
