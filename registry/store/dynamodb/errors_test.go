package dynamodb

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestUnavailableOnlyWhenTransient: a failed call is store.ErrUnavailable only when a retry
// may pass; refused credentials, a missing table or a rejected request are not.
func TestUnavailableOnlyWhenTransient(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		transient bool
	}{
		{"no answer", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"throttled", &types.ProvisionedThroughputExceededException{}, true},
		{"request limit", &smithy.GenericAPIError{Code: "RequestLimitExceeded"}, true},
		{"throttling", &smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{"server error", &types.InternalServerError{}, true},
		{"expired token", &smithy.GenericAPIError{Code: "ExpiredTokenException"}, true},
		{"access denied", &smithy.GenericAPIError{Code: "AccessDeniedException"}, false},
		{"unknown credentials", &smithy.GenericAPIError{Code: "UnrecognizedClientException"}, false},
		{"no table", &types.ResourceNotFoundException{}, false},
		{"rejected request", &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := unavailable("put export", c.err)
			if got := errors.Is(err, store.ErrUnavailable); got != c.transient {
				t.Fatalf("unavailable(%v) is ErrUnavailable: %v, want %v", c.err, got, c.transient)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("the cause is lost: %v", err)
			}
		})
	}
	if !errors.Is(errConcurrentWrite, store.ErrUnavailable) {
		t.Fatal("a read that kept meeting a concurrent write is not transient")
	}
}
