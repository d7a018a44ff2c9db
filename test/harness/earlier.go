package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EarlierRelease is the commit whose binaries, image and chart the version-skew and upgrade
// tests run beside the current ones: an earlier state of this repository that users run.
// It moves forward as releases are tagged (RELEASING.md).
const EarlierRelease = "cecab64"

// EarlierBinaries returns the folder holding mcs-registry, mcs-controller, mcs-admin and
// global-discovery-service built from commit rev of this repository, building them on
// first use (a git worktree of rev and its own hack/build-binaries.sh) into bin/earlier/<rev>.
func EarlierBinaries(tb testing.TB, rev string) string {
	tb.Helper()
	root := repoRoot(tb)
	out := filepath.Join(root, "bin", "earlier", rev)
	if _, err := os.Stat(filepath.Join(out, "mcs-controller")); err == nil {
		return out
	}
	tmp := out + ".tmp"
	_ = os.RemoveAll(tmp)
	start := time.Now()
	inWorktree(tb, rev, func(tree string) {
		runIn(tb, tree, []string{"VERSION=" + rev}, "bash", "hack/build-binaries.sh", tmp)
	})
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Logf("harness: built the binaries of %s in %s", rev, time.Since(start).Round(time.Second))
	return out
}

// EarlierImage returns the project's image built from commit rev by that commit's own
// hack/build-image.sh (what its `make image` runs), tagged localhost/global-discovery-mcs:<rev>
// like ProjectImage, for Cluster.ImportImage. It is built on first use into
// .cache/images/earlier-<rev>.oci.tar.
func EarlierImage(tb testing.TB, rev string) NodeImage {
	tb.Helper()
	root := repoRoot(tb)
	repo := ProjectImage[:len(ProjectImage)-len(":test")]
	img := NodeImage{Ref: repo + ":" + rev, Tar: filepath.Join(root, ".cache", "images", "earlier-"+rev+".oci.tar")}
	if _, err := os.Stat(img.Tar); err == nil {
		return img
	}
	tmp := img.Tar + ".tmp"
	start := time.Now()
	inWorktree(tb, rev, func(tree string) {
		runIn(tb, tree, []string{"VERSION=" + rev, "IMAGE_REPOSITORY=" + repo}, "bash", "hack/build-image.sh", tmp)
	})
	if err := os.Rename(tmp, img.Tar); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Logf("harness: built the image of %s in %s", rev, time.Since(start).Round(time.Second))
	return img
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
