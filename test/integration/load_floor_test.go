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

// dynamoWriteFloor is what DynamoDB itself takes to store the write burst's items
// (writeBurst: n writes of its own export by each of writers clusters, back to back, all
// writers at once): the same export items — spec and encoded endpoints — written directly
// by writers goroutines, one PutItem each, back to back, with no condition, no usage and
// no transaction, in a partition of their own. It returns the items a second: the floor
// of the DynamoDB store's write rate in the same run.
func dynamoWriteFloor(b *testing.B, d *harness.DynamoDB, table string, writers, n int) float64 {
	ctx := context.Background()
	api := d.Client()
	spec, err := proto.Marshal(relaySpec(80))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for i := range n {
				eps, err := proto.Marshal(&registryv1.Export{EndpointGroups: endpoints(fmt.Sprintf("10.%d.2.%d", w, i%250), "10.0.1.1")})
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
					"PK":   &types.AttributeValueMemberS{Value: "FLOOR#prod"},
					"SK":   &types.AttributeValueMemberS{Value: fmt.Sprintf("EXPORT#dynamo/pool-%04d#load-%03d", w, w)},
					"spec": &types.AttributeValueMemberB{Value: spec},
					"eps":  &types.AttributeValueMemberB{Value: eps},
				}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(writers*n) / time.Since(start).Seconds()
}
