package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// dynamoLoadFloor is what DynamoDB itself takes to store a load's exports: the same items
// (one per cluster and Service, its spec and encoded endpoints, in a partition of its own)
// written by plain TransactWriteItems of 50 items, each cluster's in parallel as the
// registry's sync writes them (up to 16 requests at once per cluster), with no condition,
// no read and no stream reader. It is the floor of the DynamoDB store's load time in the
// same run.
func dynamoLoadFloor(b *testing.B, d *harness.DynamoDB, table string, reqs []*registryv1.SyncExportsRequest) time.Duration {
	ctx := context.Background()
	api := d.Client()
	bin := func(m proto.Message) []byte {
		out, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	type batch []types.TransactWriteItem
	var batches []batch
	for _, req := range reqs {
		var cur batch
		for _, x := range req.GetExports() {
			cur = append(cur, types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{
				"PK":   &types.AttributeValueMemberS{Value: "FLOOR#" + req.GetClusterset()},
				"SK":   &types.AttributeValueMemberS{Value: fmt.Sprintf("EXPORT#%s/%s#%s", x.GetService().GetNamespace(), x.GetService().GetName(), req.GetClusterId())},
				"spec": &types.AttributeValueMemberB{Value: bin(x.GetSpec())},
				"eps":  &types.AttributeValueMemberB{Value: bin(&registryv1.Export{EndpointGroups: x.GetEndpointGroups()})},
			}}})
			if len(cur) == 50 {
				batches = append(batches, cur)
				cur = nil
			}
		}
		if len(cur) > 0 {
			batches = append(batches, cur)
		}
	}
	sem := make(chan struct{}, 16*len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	for _, bt := range batches {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: bt}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
