package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// prior is what the table holds of an export before a write: its chunks (to remove after
// the write), its create time, the write it holds (writeUs: the next write's condition) and
// its weight (the usage the next write changes).
type prior struct {
	gen     string
	chunks  int
	create  time.Time
	writeUs int64
	weight  store.Usage
}

func (st *Store) priorFrom(ctx context.Context, clusterset string, item map[string]types.AttributeValue) *prior {
	if item == nil {
		return nil
	}
	return &prior{gen: getS(item, "gen"), chunks: int(getN(item, "chunks")), create: fromMs(getN(item, "createMs")),
		writeUs: getN(item, "writeUs"), weight: st.weightOf(ctx, clusterset, item)}
}

// putExport writes one export: chunk items first (when the endpoints do not fit inline),
// then the export item in a transaction with a check that the cluster exists, then the
// previous chunks are removed. old is what the table held (nil: nothing).
func (st *Store) putExport(ctx context.Context, e store.Export, enc encoded, old *prior) (store.Export, error) {
	var err error
	p := pk(e.Clusterset)
	var update string
	var values map[string]types.AttributeValue
	gen := ""
	var parts [][]byte
	if len(enc.eps) <= inlineLimit {
		update, values = inlineUpdate(e, enc)
	} else {
		if parts, err = chunks(e.EndpointGroups); err != nil {
			return store.Export{}, fmt.Errorf("split endpoints: %w", err)
		}
		gen = newGen()
		for i, part := range parts {
			if _, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &st.table, Item: map[string]types.AttributeValue{
				attrPK: strAttr(p), attrSK: strAttr(chunkPrefix(e.Service, e.ClusterID, gen) + strconv.Itoa(i)), "data": bytesAttr(part),
				"createMs": numAttr(st.now().UnixMilli()),
			}}); err != nil {
				return store.Export{}, unavailable("write endpoint chunk", err)
			}
		}
		update, values = exportValues(e, enc)
		values[":gen"], values[":chunks"] = strAttr(gen), numAttr(int64(len(parts)))
		update += ", gen = :gen, chunks = :chunks REMOVE eps"
	}
	w := st.now().UnixMicro()
	for attempt := 1; ; attempt++ {
		err = st.writeExport(ctx, p, e, enc, update, values, old, w)
		if attempt == 5 || ctx.Err() != nil {
			break
		}
		switch {
		case errors.Is(err, errFenced) && attempt < 3:
			// A delete of this cluster's exports was sent after this write, but the write's
			// client still waits: the write is still wanted. Send it again, as of now.
			w = st.now().UnixMicro()
			continue
		case errors.Is(err, errNoUsage):
			if err = st.countUsage(ctx, e.ClusterKey()); err == nil {
				continue
			}
		case errors.Is(err, errPriorChanged):
			// Another write or delete of the export applied since it was read: write over
			// it only if this write is the newer.
			item, rerr := st.getExportItem(ctx, e.Clusterset, e.Service, e.ClusterID)
			if err = rerr; err == nil {
				old = st.priorFrom(ctx, e.Clusterset, item)
				continue
			}
		}
		break
	}
	if err != nil {
		if errors.Is(err, errFenced) || errors.Is(err, store.ErrSuperseded) || errors.Is(err, store.ErrClusterNotFound) || errors.Is(err, store.ErrQuotaExceeded) {
			// The write surely did not apply: its chunks are nobody's. (After any other
			// error it may have applied, and its chunks are kept.)
			st.deleteChunks(context.WithoutCancel(ctx), e.Clusterset, e.Service, e.ClusterID, gen, len(parts))
		}
		if errors.Is(err, errFenced) {
			return store.Export{}, fmt.Errorf("put export %s from %s/%s: a delete of the cluster's exports came after it: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrSuperseded)
		}
		return store.Export{}, err
	}
	if old != nil && old.gen != "" {
		st.deleteChunks(ctx, e.Clusterset, e.Service, e.ClusterID, old.gen, old.chunks)
	}
	stored := asStored(e, old)
	st.priors.put(exportPriorKey(e), prior{gen: gen, chunks: len(parts), create: stored.CreateTime, writeUs: w, weight: enc.weight})
	return stored, nil
}

// asStored is an export as the table holds it after its write: times in milliseconds (so
// the write's result and later reads of it are equal), and the create time written once
// (the prior one, or this write's).
func asStored(e store.Export, old *prior) store.Export {
	e.CreateTime, e.UpdateTime = fromMs(ms(e.CreateTime)), fromMs(ms(e.UpdateTime))
	if old != nil {
		e.CreateTime = old.create
	}
	return e
}

// exportValues is the update of an export item's attributes other than its endpoints.
func exportValues(e store.Export, enc encoded) (string, map[string]types.AttributeValue) {
	values := map[string]types.AttributeValue{
		":spec": bytesAttr(enc.spec), ":now": numAttr(ms(e.CreateTime)), ":upd": numAttr(ms(e.UpdateTime)), ":sum": bytesAttr(enc.sum),
	}
	values[":nE"], values[":nB"] = numAttr(int64(enc.weight.Endpoints)), numAttr(int64(enc.weight.Bytes))
	return "SET spec = :spec, createMs = if_not_exists(createMs, :now), updateMs = :upd, writeUs = :w, #sum = :sum, nE = :nE, nB = :nB", values
}

// inlineUpdate is the update of an export item whose endpoints fit in it.
func inlineUpdate(e store.Export, enc encoded) (string, map[string]types.AttributeValue) {
	update, values := exportValues(e, enc)
	values[":eps"] = bytesAttr(enc.eps)
	return update + ", eps = :eps REMOVE gen, chunks", values
}

// errFenced: a delete of the cluster's exports is newer than the write.
var errFenced = errors.New("fenced by a later delete")

// writeExport is the export item's write at time w over old (what the item held when
// read): it applies only when the cluster exists, no delete of its exports is newer
// (fenceUs), the item still holds old, and the cluster's usage after it is within the
// quota.
func (st *Store) writeExport(ctx context.Context, p string, e store.Export, enc encoded, update string, values map[string]types.AttributeValue, old *prior, w int64) error {
	if old != nil && old.writeUs >= w {
		return fmt.Errorf("put export %s from %s/%s: a newer write of it applied: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrSuperseded)
	}
	d := delta(enc.weight, old)
	usage, ok := st.usageUpdate(p, e.ClusterID, d)
	if !ok {
		return fmt.Errorf("put export %s: %w", e.Service, st.quotaError(e.ClusterKey(), d))
	}
	items := []types.TransactWriteItem{clusterCheck(&st.table, p, e.ClusterID, w), usage, exportUpdate(&st.table, p, e, update, values, w, old)}
	if old == nil {
		items = append(items, st.keysChange(p, e.ClusterID, false, e.Service)) // a new export: one more key
	}
	err := st.commit(ctx, p, items, len(enc.spec)+len(enc.eps)+len(enc.sum)+512)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) >= 3 {
		cluster, used, export := tce.CancellationReasons[0], tce.CancellationReasons[1], tce.CancellationReasons[2]
		switch {
		case aws.ToString(cluster.Code) == "ConditionalCheckFailed" && len(cluster.Item) == 0:
			return fmt.Errorf("put export %s from %s/%s: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrClusterNotFound)
		case aws.ToString(cluster.Code) == "ConditionalCheckFailed":
			return errFenced
		case aws.ToString(export.Code) == "ConditionalCheckFailed":
			return errPriorChanged
		case aws.ToString(used.Code) == "ConditionalCheckFailed":
			// A *QuotaError, or errNoUsage / errPriorChanged for the caller to act on.
			return st.usageRefusal(e.ClusterKey(), used.Item, d)
		}
	}
	if isCondFailed(err) {
		return fmt.Errorf("put export %s from %s/%s: %w", e.Service, e.Clusterset, e.ClusterID, store.ErrClusterNotFound)
	}
	if err != nil {
		return unavailable("put export", err)
	}
	return nil
}

func (st *Store) getExportItem(ctx context.Context, clusterset string, svc store.ServiceKey, id string) (map[string]types.AttributeValue, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: key(pk(clusterset), exportSK(svc, id)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, unavailable("get export", err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// PutExport implements store.Store.
func (st *Store) PutExport(ctx context.Context, e store.Export) (store.Export, error) {
	enc, err := encodeExport(e)
	if err != nil {
		return store.Export{}, err
	}
	// An export past a quota on its own is refused before any read or chunk write: the
	// cluster's usage after the write is at least its weight.
	if err := st.quota.Check(e.ClusterKey(), enc.weight); err != nil {
		return store.Export{}, fmt.Errorf("put export %s: %w", e.Service, err)
	}
	// What this replica's last write of the export left in the table: no read first. A
	// guess another write made stale fails the write's condition, which reads and retries;
	// one that says a newer write applied is read again here rather than believed.
	if old, ok := st.priors.get(exportPriorKey(e)); ok {
		stored, err := st.putExport(ctx, e, enc, &old)
		if !errors.Is(err, store.ErrSuperseded) {
			return stored, err
		}
	}
	// What the table holds now: its chunks go after the write, and its create time is the
	// export's (written once). A first write racing another replica's first write of the
	// same export may answer its own create time; the table keeps the first.
	item, err := st.getExportItem(ctx, e.Clusterset, e.Service, e.ClusterID)
	if err != nil {
		return store.Export{}, err
	}
	return st.putExport(ctx, e, enc, st.priorFrom(ctx, e.Clusterset, item))
}

// DeleteExport implements store.Store. It first raises the cluster's fence, so that an
// export write received before the delete and still on its way to DynamoDB cannot apply
// after it; then it deletes the export unless a newer write replaced it.
func (st *Store) DeleteExport(ctx context.Context, k store.ClusterKey, svc store.ServiceKey) (bool, error) {
	f, err := st.raiseFence(ctx, k)
	if err != nil {
		return false, err
	}
	return st.deleteExportItem(ctx, k, svc, f, true)
}

// raiseFence sets the cluster's fenceUs to now and returns it: no export write of the
// cluster sent before it applies after.
func (st *Store) raiseFence(ctx context.Context, k store.ClusterKey) (int64, error) {
	f := st.now().UnixMicro()
	_, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table, Key: key(pk(k.Clusterset), clusterSK(k.ClusterID)),
		UpdateExpression:          aws.String("SET fenceUs = :f"),
		ConditionExpression:       aws.String("attribute_exists(PK) AND (attribute_not_exists(fenceUs) OR fenceUs < :f)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": numAttr(f)},
	})
	if err != nil && !isCondFailed(err) {
		// A failed condition: the cluster is gone (its exports with it) or a newer fence stands.
		return 0, unavailable("fence export writes", err)
	}
	return f, nil
}

// deleteExportItem deletes the export, with its chunks, unless a write newer than the
// fence f replaced it; with counted, in one transaction with the change of its cluster's
// usage (a deleted cluster's usage goes with it instead).
func (st *Store) deleteExportItem(ctx context.Context, k store.ClusterKey, svc store.ServiceKey, f int64, counted bool) (bool, error) {
	p := pk(k.Clusterset)
	st.priors.forget(priorKey{clusterset: k.Clusterset, clusterID: k.ClusterID, service: svc})
	for attempt := 1; ; attempt++ {
		item, err := st.getExportItem(ctx, k.Clusterset, svc, k.ClusterID)
		if err != nil {
			return false, err
		}
		if item == nil {
			return false, nil
		}
		old := st.priorFrom(ctx, k.Clusterset, item)
		if old.writeUs >= f {
			return false, nil // a newer write of the export stands
		}
		cond, values := priorCheck(old)
		del := types.TransactWriteItem{Delete: &types.Delete{TableName: &st.table, Key: key(p, exportSK(svc, k.ClusterID)),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: values}}
		if len(values) == 0 {
			del.Delete.ExpressionAttributeValues = nil
		}
		items := []types.TransactWriteItem{del}
		if counted {
			usage, _ := st.usageUpdate(p, k.ClusterID, store.Usage{}.Sub(old.weight)) // a decrease is never refused for a quota
			items = append(items, usage, st.keysChange(p, k.ClusterID, true, svc))
		}
		err = st.transact(ctx, items)
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) && attempt < 5 && ctx.Err() == nil {
			reasons := tce.CancellationReasons
			switch {
			case len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed":
				continue // the export changed since it was read: read it again
			case len(reasons) > 1 && aws.ToString(reasons[1].Code) == "ConditionalCheckFailed":
				if err := st.countUsage(ctx, k); err != nil {
					return false, err
				}
				continue
			}
		}
		if err != nil {
			return false, unavailable("delete export", err)
		}
		if old.gen != "" {
			st.deleteChunks(ctx, k.Clusterset, svc, k.ClusterID, old.gen, old.chunks)
		}
		return true, nil
	}
}
