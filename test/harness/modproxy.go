package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ModulePrefix is the module path every module of this repository starts with.
const ModulePrefix = "github.com/ai-dynamo/global-discovery-mcs/"

// ModuleProxy writes a file:// module proxy of the repository's released modules at
// version (tools/modproxy; empty: v0.0.0-dev.<hash of their files>, a version nobody
// publishes) and returns the GOPROXY entry and the version. With it first in GOPROXY and
// GONOSUMDB set to the repository, GOWORK=off builds take the modules as a user's Go
// command takes them from a tag.
func ModuleProxy(tb testing.TB, version string) (goproxy, v string) {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	work := tb.TempDir()
	tool := filepath.Join(work, "modproxy")
	build := exec.Command("go", "build", "-o", tool, ".")
	build.Dir = filepath.Join(root, "tools", "modproxy")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("harness: building tools/modproxy: %v\n%s", err, out)
	}
	proxy := filepath.Join(work, "proxy")
	args := []string{"-root", root, "-out", proxy}
	if version != "" {
		args = append(args, "-version", version)
	}
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		tb.Fatalf("harness: modproxy: %v", err)
	}
	return "file://" + proxy, strings.TrimSpace(string(out))
}
