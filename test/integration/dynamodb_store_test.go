package integration

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/storetest"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestDynamoDBStoreConformance runs the store conformance suite against the DynamoDB
// store on dynoxide, a fresh table per test.
func TestDynamoDBStoreConformance(t *testing.T) {
	d := harness.StartDynamoDB(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		table := harness.TableName(t)
		if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
			t.Fatal(err)
		}
		return dynamostore.New(dynamostore.Options{
			Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table,
		})
	})
}
