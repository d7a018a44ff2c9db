// Package release checks how the binaries are built for the image and for releases. There
// is no Docker engine on the build machines, so the test runs the Dockerfile's own build
// command instead of `docker build`.
package release

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

var binaries = []string{"mcs-registry", "mcs-controller", "mcs-admin", "global-discovery-service"}

func TestDockerfileBuildsLikeMake(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var run, copyBins, copyCRDs string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "RUN ") && strings.Contains(l, "hack/build-binaries.sh"):
			run = l
		case strings.HasPrefix(l, "COPY --from=build /out/"):
			copyBins = l
		case strings.HasPrefix(l, "COPY charts/global-discovery-mcs/files/crds"):
			copyCRDs = l
		}
	}
	if run == "" || copyCRDs == "" {
		t.Fatalf("the Dockerfile does not build with hack/build-binaries.sh or does not copy the CRDs (run %q, crds %q)", run, copyCRDs)
	}
	for _, b := range binaries {
		if !strings.Contains(copyBins, "/out/"+b) {
			t.Fatalf("the image lacks %s: %q", b, copyBins)
		}
	}
	makefile, _ := os.ReadFile(filepath.Join(root, "Makefile"))
	if !strings.Contains(string(makefile), "bash hack/build-binaries.sh $(BIN)") {
		t.Fatal("make build does not use hack/build-binaries.sh")
	}
	// Run the Dockerfile's build command as the image's build stage would.
	out := t.TempDir()
	cmd := exec.Command("bash", "hack/build-binaries.sh", out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "VERSION=v9.9.9-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	for _, b := range binaries {
		p := filepath.Join(out, b)
		e, err := elf.Open(p)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		for _, prog := range e.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Fatalf("%s is dynamically linked; the distroless static image cannot run it", b)
			}
		}
		e.Close()
		v, err := exec.Command(p, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(v), "v9.9.9-test") {
			t.Fatalf("%s --version: %v %s", b, err, v)
		}
	}
}
