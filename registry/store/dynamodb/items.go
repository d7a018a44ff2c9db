package dynamodb

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

func pk(clusterset string) string { return "CS#" + clusterset }

func clusterSK(id string) string { return "CLUSTER#" + id }

func exportPrefix(svc store.ServiceKey) string {
	return "EXPORT#" + svc.Namespace + "/" + svc.Name + "#"
}

func exportSK(svc store.ServiceKey, id string) string { return exportPrefix(svc) + id }

func chunkPrefix(svc store.ServiceKey, id, gen string) string {
	return chunksOf(svc, id) + gen + "#"
}

// chunksOf is the prefix of every chunk of one cluster's export, of any generation.
func chunksOf(svc store.ServiceKey, id string) string {
	return "EPS#" + svc.Namespace + "/" + svc.Name + "#" + id + "#"
}

func strAttr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func numAttr(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func bytesAttr(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }

func key(p, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: strAttr(p), attrSK: strAttr(sk)}
}

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) int64 {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}

func getB(item map[string]types.AttributeValue, k string) []byte {
	if v, ok := item[k].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func isCondFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}

// unavailable wraps a failed DynamoDB call. Only what may pass by retrying is
// store.ErrUnavailable (the server answers UNAVAILABLE and clients retry): no answer, a
// timeout, throttling, a 5xx. What retrying cannot fix — a refused credential or
// permission, a missing table, a request DynamoDB rejects — is returned as it is (the
// server answers INTERNAL and logs it at ERROR), so a broken IAM policy is not mistaken for an outage.
func unavailable(op string, err error) error {
	if permanent(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
}

// permanentCodes are DynamoDB's error codes that a retry does not change
// (ExpiredTokenException is not one: refreshed credentials fix it).
var permanentCodes = map[string]bool{
	"AccessDeniedException":                    true,
	"UnrecognizedClientException":              true,
	"InvalidSignatureException":                true,
	"MissingAuthenticationToken":               true,
	"IncompleteSignature":                      true,
	"ResourceNotFoundException":                true,
	"ValidationException":                      true,
	"SerializationException":                   true,
	"ItemCollectionSizeLimitExceededException": true,
}

func permanent(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false // no answer: the network, a timeout, a cancelled context
	}
	return permanentCodes[api.ErrorCode()]
}

// errBadItem marks an item whose shape is not one this store writes.
var errBadItem = errors.New("malformed item")

type exportKey struct {
	Service   store.ServiceKey
	ClusterID string
}

func exportKeyFrom(item map[string]types.AttributeValue) (exportKey, error) {
	return parseExportSK(getS(item, attrSK))
}

// parseExportSK reads EXPORT#<namespace>/<name>#<cluster id>, each part checked as the
// registry checks requests.
func parseExportSK(sk string) (exportKey, error) {
	rest, ok := strings.CutPrefix(sk, "EXPORT#")
	i := strings.LastIndexByte(rest, '#')
	if !ok || i < 0 {
		return exportKey{}, fmt.Errorf("export item %q: %w: the sort key is not EXPORT#<namespace>/<name>#<cluster>", sk, errBadItem)
	}
	svc, id := rest[:i], rest[i+1:]
	ns, name, ok := strings.Cut(svc, "/")
	var errs validate.Errors
	validate.DNSLabel(&errs, "namespace", ns)
	validate.ServiceName(&errs, "name", name)
	validate.DNSLabel(&errs, "cluster id", id)
	if err := errs.Err(); !ok || err != nil {
		return exportKey{}, fmt.Errorf("export item %q: %w: %v", sk, errBadItem, err)
	}
	return exportKey{Service: store.ServiceKey{Namespace: ns, Name: name}, ClusterID: id}, nil
}

// chunkKey names an endpoint chunk: its export and generation.
type chunkKey struct {
	exportKey
	gen string
}

// parseChunkSK reads EPS#<namespace>/<name>#<cluster id>#<gen>#<i>.
func parseChunkSK(sk string) (chunkKey, error) {
	rest, _ := strings.CutPrefix(sk, "EPS#")
	parts := strings.Split(rest, "#")
	if len(parts) != 4 {
		return chunkKey{}, fmt.Errorf("chunk item %q: %w: the sort key is not EPS#<namespace>/<name>#<cluster>#<generation>#<index>", sk, errBadItem)
	}
	ek, err := parseExportSK("EXPORT#" + parts[0] + "#" + parts[1])
	if err != nil {
		return chunkKey{}, err
	}
	return chunkKey{exportKey: ek, gen: parts[2]}, nil
}

// chunkIndex is the index at the end of a chunk item's sort key.
func chunkIndex(item map[string]types.AttributeValue) (int, error) {
	sk := getS(item, attrSK)
	n, err := strconv.Atoi(sk[strings.LastIndexByte(sk, '#')+1:])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("chunk item %q: %w: no chunk index", sk, errBadItem)
	}
	return n, nil
}
