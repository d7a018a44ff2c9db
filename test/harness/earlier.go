package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// EarlierRelease is the commit whose binaries the version-skew tests run beside the
// current ones: an earlier state of this repository that users run. It moves forward as
// releases are tagged (RELEASING.md).
const EarlierRelease = "cecab64"

// EarlierBinaries returns the folder holding mcs-registry, mcs-controller, mcs-admin and
// global-discovery-service built from commit rev of this repository, building them on
// first use (a git worktree of rev and its own hack/build-binaries.sh) into bin/earlier/<rev>.
func EarlierBinaries(tb testing.TB, rev string) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	out := filepath.Join(root, "bin", "earlier", rev)
	if _, err := os.Stat(filepath.Join(out, "mcs-controller")); err == nil {
		return out
	}
	tree := filepath.Join(tb.TempDir(), "tree")
	run := func(dir string, env []string, name string, args ...string) {
		tb.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("harness: building the binaries of %s: %s %v: %v\n%s", rev, name, args, err, b)
		}
	}
	start := time.Now()
	run(root, nil, "git", "worktree", "add", "--detach", "--force", tree, rev)
	defer run(root, nil, "git", "worktree", "remove", "--force", tree)
	tmp := out + ".tmp"
	_ = os.RemoveAll(tmp)
	run(tree, []string{"VERSION=" + rev}, "bash", "hack/build-binaries.sh", tmp)
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Logf("harness: built the binaries of %s in %s", rev, time.Since(start).Round(time.Second))
	return out
}
