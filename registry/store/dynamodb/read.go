package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

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
		want := int(getN(item, "chunks"))
		parts, err := st.query(ctx, clusterset, chunkPrefix(ek.Service, ek.ClusterID, gen))
		if err != nil {
			return e, err
		}
		if len(parts) != want {
			return e, fmt.Errorf("export %s from %s: %d of %d endpoint chunks: %w", ek.Service, ek.ClusterID, len(parts), want, errConcurrentWrite)
		}
		type chunk struct {
			n    int
			data []byte
		}
		ordered := make([]chunk, len(parts))
		for i, p := range parts {
			n, err := chunkIndex(p)
			if err != nil {
				return e, err
			}
			ordered[i] = chunk{n, getB(p, "data")}
		}
		sort.Slice(ordered, func(a, b int) bool { return ordered[a].n < ordered[b].n })
		for _, c := range ordered {
			groups, err := unmarshalGroups(c.data)
			if err != nil {
				return e, fmt.Errorf("decode endpoint chunk %d of %s from %s: %w: %w", c.n, ek.Service, ek.ClusterID, errBadItem, err)
			}
			e.EndpointGroups = appendMerged(e.EndpointGroups, groups)
		}
		return e, nil
	}
	groups, err := unmarshalGroups(getB(item, "eps"))
	if err != nil {
		return e, fmt.Errorf("decode endpoints of %s from %s: %w: %w", ek.Service, ek.ClusterID, errBadItem, err)
	}
	e.EndpointGroups = groups
	return e, nil
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
// while its chunks were read.
func (st *Store) listExports(ctx context.Context, clusterset, prefix string) ([]store.Export, error) {
	for attempt := 0; ; attempt++ {
		items, err := st.query(ctx, clusterset, prefix)
		if err != nil {
			return nil, err
		}
		out := make([]store.Export, 0, len(items))
		retry := false
		for _, it := range items {
			e, err := st.exportFrom(ctx, clusterset, it)
			if errors.Is(err, errConcurrentWrite) && attempt < 5 {
				retry = true
				break
			}
			if errors.Is(err, errBadItem) {
				st.badItem(pk(clusterset), getS(it, attrSK), err)
				continue
			}
			if err != nil {
				return nil, err
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
			return out, nil
		}
	}
}

// ListExports implements store.Store.
func (st *Store) ListExports(ctx context.Context, clusterset string) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, "EXPORT#")
}

// ListServiceExports implements store.Store.
func (st *Store) ListServiceExports(ctx context.Context, clusterset string, svc store.ServiceKey) ([]store.Export, error) {
	return st.listExports(ctx, clusterset, exportPrefix(svc))
}
