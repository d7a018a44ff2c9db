package integration

import (
	"flag"
	"os"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestMain keeps spare clusters (harness.KeepSpareClusters): each test gets new clusters,
// started while the tests before it ran. Not for benchmarks: a spare starting beside
// one would take CPU from what it measures.
func TestMain(m *testing.M) {
	flag.Parse()
	stop := func() {}
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		stop = harness.KeepSpareClusters()
	}
	code := m.Run()
	stop()
	os.Exit(code)
}
