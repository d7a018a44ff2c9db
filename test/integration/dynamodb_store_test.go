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

// TestDynamoDBStoreQuotaConformance runs the quota suite with replicas as the registry has
// them: several stores over one table on dynoxide, each checking the quota in its writes.
// Before, each replica checked its own cache, and one cluster held 38 exports of 20.
func TestDynamoDBStoreQuotaConformance(t *testing.T) {
	d := harness.StartDynamoDB(t)
	storetest.RunQuota(t, func(t *testing.T, q store.Quota, n int) []store.Store {
		table := harness.TableName(t)
		if _, err := dynamostore.CreateTable(context.Background(), d.Client(), table); err != nil {
			t.Fatal(err)
		}
		out := make([]store.Store, n)
		for i := range out {
			out[i] = dynamostore.New(dynamostore.Options{Client: d.Client(), Streams: dynamodbstreams.NewFromConfig(d.Config()), Table: table, Quota: q})
		}
		return out
	})
}
