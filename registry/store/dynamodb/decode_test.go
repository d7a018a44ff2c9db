package dynamodb

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestDecodeRefusesMalformedKeys(t *testing.T) {
	for _, sk := range []string{"EXPORT#junk", "EXPORT#", "EXPORT##", "EXPORT#ns/#c", "EXPORT#/name#c", "EXPORT#ns/name#", "EXPORT#NS/name#c", "EXPORT#ns/name", "CLUSTER#"} {
		if _, err := parseExportSK(sk); err == nil || !errors.Is(err, errBadItem) {
			if sk != "CLUSTER#" {
				t.Errorf("parseExportSK(%q) = %v, want a bad-item error", sk, err)
			}
		}
		keys := map[string]streamtypes.AttributeValue{attrPK: &streamtypes.AttributeValueMemberS{Value: "CS#prod"}, attrSK: &streamtypes.AttributeValueMemberS{Value: sk}}
		if c, err := changeFrom(keys); err == nil || !errors.Is(err, errBadItem) {
			t.Errorf("changeFrom(%q) = %v, %v; want a bad-item error", sk, c, err)
		}
	}
	if k, err := parseExportSK("EXPORT#dynamo/my-svc#use1-a"); err != nil || k.Service.Namespace != "dynamo" || k.Service.Name != "my-svc" || k.ClusterID != "use1-a" {
		t.Errorf("parseExportSK of a good key = %+v, %v", k, err)
	}
	for name, item := range map[string]map[string]types.AttributeValue{
		"no lease":           {attrSK: strAttr("CLUSTER#a")},
		"bad id":             {attrSK: strAttr("CLUSTER#A_B"), "leaseMs": numAttr(30000)},
		"not a cluster":      {attrSK: strAttr("EXPORT#x"), "leaseMs": numAttr(30000)},
		"lease not a number": {attrSK: strAttr("CLUSTER#a"), "leaseMs": strAttr("x")},
	} {
		if _, err := clusterFrom("prod", item); !errors.Is(err, errBadItem) {
			t.Errorf("clusterFrom(%s) = %v, want a bad-item error", name, err)
		}
	}
	if c, err := clusterFrom("prod", map[string]types.AttributeValue{attrSK: strAttr("CLUSTER#a"), "leaseMs": numAttr(30000)}); err != nil || c.ClusterID != "a" {
		t.Errorf("clusterFrom of a good item = %+v, %v", c, err)
	}
	// A chunk key changes nothing by itself; a key of another shape is refused.
	for pk, sk := range map[string]string{"CS#prod": "EPS#dynamo/svc#a#g#0", "other": "EXPORT#dynamo/svc#a"} {
		c, err := changeFrom(map[string]streamtypes.AttributeValue{attrPK: &streamtypes.AttributeValueMemberS{Value: pk}, attrSK: &streamtypes.AttributeValueMemberS{Value: sk}})
		if pk == "CS#prod" && (c != nil || err != nil) || pk != "CS#prod" && !errors.Is(err, errBadItem) {
			t.Errorf("changeFrom(%q, %q) = %v, %v", pk, sk, c, err)
		}
	}
}

// FuzzDecodeItem: no stored key or attribute makes a decoder panic.
func FuzzDecodeItem(f *testing.F) {
	f.Add("CS#prod", "EXPORT#dynamo/svc#use1-a", int64(30000), []byte{0x0a, 0x00})
	f.Add("CS#prod", "CLUSTER#use1-a", int64(30000), []byte(nil))
	f.Add("CS#prod", "EXPORT#junk", int64(0), []byte{0xff})
	f.Add("CS#", "EPS#a/b#c#g#x", int64(-1), []byte{})
	f.Fuzz(func(t *testing.T, pkv, sk string, lease int64, data []byte) {
		item := map[string]types.AttributeValue{attrPK: strAttr(pkv), attrSK: strAttr(sk), "leaseMs": numAttr(lease), "spec": bytesAttr(data), "eps": bytesAttr(data), "data": bytesAttr(data)}
		_, _ = clusterFrom("prod", item)
		if _, err := exportKeyFrom(item); err == nil {
			st := &Store{badItem: func(string, string, error) {}}
			_, _ = st.exportFrom(t.Context(), "prod", item)
		}
		_, _ = chunkIndex(item)
		_, _ = unmarshalGroups(data)
		_, _ = changeFrom(map[string]streamtypes.AttributeValue{attrPK: &streamtypes.AttributeValueMemberS{Value: pkv}, attrSK: &streamtypes.AttributeValueMemberS{Value: sk}})
	})
}
