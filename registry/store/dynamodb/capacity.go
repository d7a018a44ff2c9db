package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CapacityFunc receives the capacity units one request consumed, by operation
// (GetItem, PutItem, UpdateItem, DeleteItem, Query, TransactWriteItems).
type CapacityFunc func(operation string, units float64)

// metered asks DynamoDB for the consumed capacity of every request and reports it.
type metered struct {
	API
	report CapacityFunc
}

func (m metered) add(op string, cc *types.ConsumedCapacity) {
	if cc != nil {
		m.report(op, aws.ToFloat64(cc.CapacityUnits))
	}
}

func (m metered) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.GetItem(ctx, in, o...)
	if err == nil {
		m.add("GetItem", out.ConsumedCapacity)
	}
	return out, err
}

func (m metered) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.PutItem(ctx, in, o...)
	if err == nil {
		m.add("PutItem", out.ConsumedCapacity)
	}
	return out, err
}

func (m metered) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.UpdateItem(ctx, in, o...)
	if err == nil {
		m.add("UpdateItem", out.ConsumedCapacity)
	}
	return out, err
}

func (m metered) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.DeleteItem(ctx, in, o...)
	if err == nil {
		m.add("DeleteItem", out.ConsumedCapacity)
	}
	return out, err
}

func (m metered) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.Query(ctx, in, o...)
	if err == nil {
		m.add("Query", out.ConsumedCapacity)
	}
	return out, err
}

func (m metered) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.API.TransactWriteItems(ctx, in, o...)
	if err == nil {
		for i := range out.ConsumedCapacity {
			m.add("TransactWriteItems", &out.ConsumedCapacity[i])
		}
	}
	return out, err
}
