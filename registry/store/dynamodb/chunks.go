package dynamodb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// An export's endpoints as stored: in the export item up to its size limit, else in chunk
// items of a generation that the export item names.

// groups wraps endpoint groups for storage; an Export message carries them.
func marshalGroups(groups []*registryv1.EndpointGroup) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(&registryv1.Export{EndpointGroups: groups})
}

func unmarshalGroups(data []byte) ([]*registryv1.EndpointGroup, error) {
	e := &registryv1.Export{}
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, err
	}
	return e.GetEndpointGroups(), nil
}

// chunks splits endpoint groups into pieces of at most chunkLimit bytes each; an endpoint
// group that is too large is split by endpoints.
func chunks(groups []*registryv1.EndpointGroup) ([][]byte, error) {
	var out [][]byte
	var cur []*registryv1.EndpointGroup
	size := 0
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		data, err := marshalGroups(cur)
		if err != nil {
			return err
		}
		out = append(out, data)
		cur, size = nil, 0
		return nil
	}
	for _, g := range groups {
		head := &registryv1.EndpointGroup{AddressType: g.GetAddressType(), Ports: g.GetPorts()}
		part := proto.Clone(head).(*registryv1.EndpointGroup)
		partSize := proto.Size(head)
		for _, e := range g.GetEndpoints() {
			es := proto.Size(e) + 8
			if size+partSize+es > chunkLimit && (len(part.Endpoints) > 0 || len(cur) > 0) {
				if len(part.Endpoints) > 0 {
					cur = append(cur, part)
				}
				if err := flush(); err != nil {
					return nil, err
				}
				part = proto.Clone(head).(*registryv1.EndpointGroup)
				partSize = proto.Size(head)
			}
			part.Endpoints = append(part.Endpoints, e)
			partSize += es
		}
		cur = append(cur, part)
		size += partSize
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func newGen() string {
	var x [6]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// putExport writes one export: chunk items first (when the endpoints do not fit inline),
// then the export item in a transaction with a check that the cluster exists, then the
// previous chunks are removed.
// encoded is an export's spec and endpoints as stored, their sum and their weight.
type encoded struct {
	spec, eps []byte
	sum       []byte
	weight    store.Usage
}

func encodeExport(e store.Export) (encoded, error) {
	spec, err := proto.MarshalOptions{Deterministic: true}.Marshal(e.Spec)
	if err != nil {
		return encoded{}, fmt.Errorf("encode export spec: %w", err)
	}
	eps, err := marshalGroups(e.EndpointGroups)
	if err != nil {
		return encoded{}, fmt.Errorf("encode endpoints: %w", err)
	}
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint64(len(spec)))
	h.Write(spec)
	h.Write(eps)
	return encoded{spec: spec, eps: eps, sum: h.Sum(nil), weight: store.Weight(e.Spec, e.EndpointGroups)}, nil
}

// deleteChunks removes the chunk items of an export's generation that no export item
// names any more; a delete that fails is reported (DroppedWrite), not retried.
func (st *Store) deleteChunks(ctx context.Context, clusterset string, svc store.ServiceKey, id, gen string, count int) {
	if count < 1 || count > maxChunks {
		// A damaged item's count (2^40): remove the chunks that exist, not every name.
		items, err := st.queryProjected(ctx, clusterset, chunkPrefix(svc, id, gen), "SK", nil)
		if err != nil {
			st.dropped("chunk_delete", err)
			return
		}
		for _, it := range items {
			if _, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(pk(clusterset), getS(it, attrSK))}); err != nil {
				st.dropped("chunk_delete", err)
			}
		}
		return
	}
	for i := range count {
		if _, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(pk(clusterset), chunkPrefix(svc, id, gen)+strconv.Itoa(i))}); err != nil {
			st.dropped("chunk_delete", err)
		}
	}
}

// orphanAge is how old a chunk of a generation its export item does not name must be before
// a reader removes it as left behind (a replaced generation whose delete failed, or the
// chunks of a write that failed before its export item): far longer than a write takes
// from its first chunk to its export item, so a write in flight keeps its new chunks.
// Chunks written before chunks carried createMs are never swept.
const orphanAge = 10 * time.Minute

// chunksOfGen splits one export's chunk items into those of generation gen and the
// orphans: other generations' chunks older than orphanAge.
func (st *Store) chunksOfGen(items []map[string]types.AttributeValue, gen string) (mine, orphans []map[string]types.AttributeValue) {
	for _, it := range items {
		ck, err := parseChunkSK(getS(it, attrSK))
		switch {
		case err == nil && ck.gen == gen:
			mine = append(mine, it)
		case err == nil && getN(it, "createMs") > 0 && st.now().Sub(fromMs(getN(it, "createMs"))) > orphanAge:
			orphans = append(orphans, it)
		}
	}
	return mine, orphans
}

// sweepChunks removes orphaned chunks and counts them; a delete that fails is reported
// (DroppedWrite) and left for the next reader.
func (st *Store) sweepChunks(ctx context.Context, clusterset string, orphans []map[string]types.AttributeValue) {
	swept := 0
	for _, it := range orphans {
		if _, err := st.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &st.table, Key: key(pk(clusterset), getS(it, attrSK))}); err != nil {
			st.dropped("chunk_sweep", err)
			continue
		}
		swept++
	}
	if swept > 0 {
		st.swept(swept)
	}
}
