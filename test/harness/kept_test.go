package harness

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestKeptBuildBuildsOnce: two callers at once get one build, kept under MCS_CACHE, and a
// later caller reuses it.
func TestKeptBuildBuildsOnce(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("MCS_CACHE", cache)
	var builds atomic.Int32
	build := func(dir string) {
		builds.Add(1)
		if err := os.WriteFile(filepath.Join(dir, "out"), []byte("built"), 0o644); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	dirs := make([]string, 3)
	for i := range 2 {
		wg.Go(func() { dirs[i] = keptBuild(t, "earlier-test", "binaries", build) })
	}
	wg.Wait()
	dirs[2] = keptBuild(t, "earlier-test", "binaries", build)
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want once", n)
	}
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "out")); err != nil || string(b) != "built" || filepath.Dir(filepath.Dir(d)) != cache {
			t.Errorf("kept build %s: %q %v, want it under %s", d, b, err, cache)
		}
	}
}
