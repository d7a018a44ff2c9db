package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestStoreError: each store error becomes the status a client acts on; only a store that
// cannot be reached is UNAVAILABLE (retry, or fail over), anything else unknown is INTERNAL.
func TestStoreError(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("renew: %w", store.ErrClusterNotFound), codes.FailedPrecondition},
		{fmt.Errorf("put: %w", store.ErrSuperseded), codes.Aborted},
		{fmt.Errorf("put: %w: dial tcp: connection refused", store.ErrUnavailable), codes.Unavailable},
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{errors.New("put export: AccessDeniedException: not authorized to perform dynamodb:PutItem"), codes.Internal},
	}
	for _, c := range cases {
		err := storeStatus("PutExport", c.err)
		if got := status.Code(err); got != c.want {
			t.Errorf("storeStatus(%v) = %v, want %v", c.err, got, c.want)
		}
		if s, _ := status.FromError(err); s.Message() != "PutExport: "+c.err.Error() && c.want != codes.FailedPrecondition {
			t.Errorf("storeStatus(%v) message %q does not carry the cause", c.err, s.Message())
		}
	}
}

// TestStoreErrorLogsInternal: a store refusal a retry cannot fix is in the registry's log.
func TestStoreErrorLogsInternal(t *testing.T) {
	var buf strings.Builder
	s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
	_ = s.storeError("put export", fmt.Errorf("put export: %w", context.Canceled))
	if buf.Len() != 0 {
		t.Fatalf("a cancelled call was logged: %s", buf.String())
	}
	_ = s.storeError("put export", errors.New("AccessDeniedException: not authorized to perform dynamodb:PutItem"))
	if !strings.Contains(buf.String(), "AccessDeniedException") || !strings.Contains(buf.String(), "level=ERROR") {
		t.Fatalf("log: %q", buf.String())
	}
}
