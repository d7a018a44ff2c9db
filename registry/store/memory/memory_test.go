package memory_test

import (
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memory.New() })
}

func TestQuotaConformance(t *testing.T) {
	storetest.RunQuota(t, func(_ *testing.T, q store.Quota, n int) []store.Store {
		s := memory.New(memory.WithQuota(q))
		out := make([]store.Store, n)
		for i := range out {
			out[i] = s
		}
		return out
	})
}
