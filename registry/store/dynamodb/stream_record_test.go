package dynamodb

import (
	"context"
	"testing"
	"time"

	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestExportRecordCarriesItsTime: an export's stream record says when the export was
// written (or that it is gone), so the replica that wrote it can skip its echo.
func TestExportRecordCarriesItsTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &Store{}
	changes := st.feed.Subscribe(ctx)
	keys := map[string]streamtypes.AttributeValue{
		attrPK: &streamtypes.AttributeValueMemberS{Value: "CS#prod"},
		attrSK: &streamtypes.AttributeValueMemberS{Value: "EXPORT#dynamo/router#use1-a"},
	}
	at := time.UnixMilli(1_700_000_000_123).UTC()
	cases := []struct {
		name      string
		rec       streamtypes.Record
		wantKnown bool
		wantTime  time.Time
	}{
		{"modify", streamtypes.Record{EventName: streamtypes.OperationTypeModify, Dynamodb: &streamtypes.StreamRecord{Keys: keys,
			NewImage: map[string]streamtypes.AttributeValue{"updateMs": &streamtypes.AttributeValueMemberN{Value: "1700000000123"}}}}, true, at},
		{"remove", streamtypes.Record{EventName: streamtypes.OperationTypeRemove, Dynamodb: &streamtypes.StreamRecord{Keys: keys}}, true, time.Time{}},
		{"no image: unknown, read", streamtypes.Record{EventName: streamtypes.OperationTypeModify, Dynamodb: &streamtypes.StreamRecord{Keys: keys}}, false, time.Time{}},
	}
	for _, c := range cases {
		st.record(context.Background(), c.rec)
		var ch store.Change
		select {
		case ch = <-changes:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no change published", c.name)
		}
		if ch.Kind != store.ChangeExport || ch.Service.Name != "router" || ch.ClusterID != "use1-a" || ch.Known != c.wantKnown {
			t.Fatalf("%s: change %+v", c.name, ch)
		}
		if c.wantTime.IsZero() != (len(ch.Exports) == 0) || (len(ch.Exports) == 1 && !ch.Exports[0].UpdateTime.Equal(c.wantTime)) {
			t.Fatalf("%s: exports %+v, want the time %v", c.name, ch.Exports, c.wantTime)
		}
	}
}
