package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestToolCacheKeepsABuild runs hack/lib/toolcache.sh as the tool build scripts do: the
// first run builds and keeps the tool, a run from another folder copies it without
// building, and a changed input builds again.
func TestToolCacheKeepsABuild(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, cache := t.TempDir(), t.TempDir()
	script := filepath.Join(dir, "build-demo.sh")
	if err := os.WriteFile(script, []byte(`set -euo pipefail
. "`+root+`/hack/lib/toolcache.sh"
cd "$(dirname "$0")"
toolcache demo "input" "$1/demo" -- sh -c 'echo built >> builds; cp input "$0"' "$1/demo"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "input")
	run := func(out string) string {
		t.Helper()
		cmd := exec.Command("bash", script, out)
		cmd.Env = append(os.Environ(), "MCS_CACHE="+cache)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, b)
		}
		got, err := os.ReadFile(filepath.Join(out, "demo"))
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	builds := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "builds"))
		return strings.Count(string(b), "built")
	}
	if err := os.WriteFile(input, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(t.TempDir()); got != "v1" || builds() != 1 {
		t.Fatalf("first run: %q, %d builds", got, builds())
	}
	if got := run(t.TempDir()); got != "v1" || builds() != 1 {
		t.Fatalf("a second checkout: %q, %d builds; want the kept build copied", got, builds())
	}
	if err := os.WriteFile(input, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(t.TempDir()); got != "v2" || builds() != 2 {
		t.Fatalf("a changed input: %q, %d builds; want a new build", got, builds())
	}
}
