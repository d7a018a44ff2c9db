package dynamodb

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// refusingWrites is a table whose puts and deletes fail; other calls are not made here.
type refusingWrites struct{ API }

var errRefused = errors.New("throttled")

func (refusingWrites) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errRefused
}

func (refusingWrites) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errRefused
}

// TestDroppedWritesAreReported: a heartbeat and the deletes of an old generation's chunks
// fail where no caller waits for them; each failure reaches DroppedWrite, named, with its
// error.
func TestDroppedWritesAreReported(t *testing.T) {
	var got []string
	st := New(Options{Client: refusingWrites{}, Table: "t", Replication: &ReplicationOptions{Region: "us-east-1", Replica: "a"},
		DroppedWrite: func(op string, err error) {
			if !errors.Is(err, errRefused) {
				t.Errorf("%s: error %v, want the table's", op, err)
			}
			got = append(got, op)
		}})
	st.heartbeat(context.Background())
	st.deleteChunks(context.Background(), "prod", store.ServiceKey{Namespace: "dynamo", Name: "svc"}, "use1-a", "g1", 2)
	if want := []string{"heartbeat", "chunk_delete", "chunk_delete"}; !slices.Equal(got, want) {
		t.Fatalf("dropped writes %v, want %v", got, want)
	}
}
