package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EarlierRelease is the commit whose binaries, image and chart the version-skew and upgrade
// tests run beside the current ones: an earlier state of this repository that users run.
// It moves forward as releases are tagged (RELEASING.md).
const EarlierRelease = "cecab64"

// EarlierBinaries returns the folder holding mcs-registry, mcs-controller, mcs-admin and
// global-discovery-service built from commit rev of this repository, building them on
// first use (a git worktree of rev and its own hack/build-binaries.sh). A commit's build is
// kept once per machine (MachineCache), so another checkout or test package reuses it.
func EarlierBinaries(tb testing.TB, rev string) string {
	tb.Helper()
	return keptBuild(tb, "earlier-"+rev, "binaries", func(out string) {
		inWorktree(tb, rev, func(tree string) {
			runIn(tb, tree, []string{"VERSION=" + rev}, "bash", "hack/build-binaries.sh", out)
		})
	})
}

// EarlierImage returns the project's image built from commit rev by that commit's own
// hack/build-image.sh (what its `make image` runs), tagged localhost/global-discovery-mcs:<rev>
// like ProjectImage, for Cluster.ImportImage. It is built on first use and kept once per
// machine (MachineCache).
func EarlierImage(tb testing.TB, rev string) NodeImage {
	tb.Helper()
	repo := ProjectImage[:len(ProjectImage)-len(":test")]
	dir := keptBuild(tb, "earlier-"+rev, "image", func(out string) {
		inWorktree(tb, rev, func(tree string) {
			runIn(tb, tree, []string{"VERSION=" + rev, "IMAGE_REPOSITORY=" + repo}, "bash", "hack/build-image.sh", filepath.Join(out, "image.oci.tar"))
		})
	})
	return NodeImage{Ref: repo + ":" + rev, Tar: filepath.Join(dir, "image.oci.tar")}
}

// MachineCache is the folder where builds that depend on nothing but their inputs are kept
// for every checkout of this machine: $MCS_CACHE, else global-discovery-mcs in the user's
// cache folder (hack/lib/toolcache.sh keeps the pinned tools under its tools/). With
// MCS_CACHE=off nothing is kept across test processes.
func MachineCache(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("MCS_CACHE")
	switch dir {
	case "off":
		return filepath.Join(repoRoot(tb), ".cache", "kept")
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return filepath.Join(repoRoot(tb), ".cache", "kept")
		}
		dir = filepath.Join(base, "global-discovery-mcs")
	}
	return dir
}

// keptBuild returns MachineCache/<key>/<part>, running build(dir) on first use. A lock
// file serializes the test processes that want it at once (the skew and the upgrade tests
// run in two packages side by side); a build that failed leaves nothing behind.
func keptBuild(tb testing.TB, key, part string, build func(dir string)) string {
	tb.Helper()
	base := filepath.Join(MachineCache(tb), key+"-"+runtime.Version())
	out := filepath.Join(base, part)
	if err := os.MkdirAll(base, 0o755); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatalf("harness: lock %s: %v", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tmp := out + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	build(tmp)
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Logf("harness: built %s %s in %s, kept in %s", key, part, time.Since(start).Round(time.Second), out)
	return out
}

// EarlierChart returns a folder holding the chart (charts/global-discovery-mcs) as it was at
// commit rev.
func EarlierChart(tb testing.TB, rev string) string {
	tb.Helper()
	dir := tb.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", rev, "charts/global-discovery-mcs")
	archive.Dir = repoRoot(tb)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		tb.Fatal(err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		tb.Fatalf("harness: git archive %s: %v\n%s", rev, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		tb.Fatalf("harness: the chart of %s: %v", rev, err)
	}
	return filepath.Join(dir, "charts", "global-discovery-mcs")
}

// inWorktree runs fn in a git worktree of commit rev of this repository.
func inWorktree(tb testing.TB, rev string, fn func(tree string)) {
	tb.Helper()
	root := repoRoot(tb)
	tree := filepath.Join(tb.TempDir(), "tree")
	runIn(tb, root, nil, "git", "worktree", "add", "--detach", "--force", tree, rev)
	defer runIn(tb, root, nil, "git", "worktree", "remove", "--force", tree)
	fn(tree)
}

func runIn(tb testing.TB, dir string, env []string, name string, args ...string) {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("harness: %s %v in %s: %v\n%s", name, args, dir, err, b)
	}
}

func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return root
}
