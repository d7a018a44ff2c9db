package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestMakeRelease runs `make release` for one platform into a temporary folder: a binaries
// tarball with a top folder holding LICENSE and README.md, the chart package, the image
// tarball, and SHA256SUMS whose sums are those of the files.
func TestMakeRelease(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-s", "release", "DIST="+dist, "PLATFORMS=linux/amd64", "IMAGE_PLATFORMS=linux/amd64", "VERSION=v9.9.9-rel")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, b)
	}
	top := "global-discovery-mcs-v9.9.9-rel-linux-amd64"
	entries := tarEntries(t, filepath.Join(dist, top+".tar.gz"), true)
	for _, f := range append([]string{"LICENSE", "README.md"}, binaries...) {
		if !slices.Contains(entries, top+"/"+f) {
			t.Errorf("%s.tar.gz lacks %s/%s: %v", top, top, f, entries)
		}
	}
	chart, _ := filepath.Glob(filepath.Join(dist, "global-discovery-mcs-*.tgz"))
	if len(chart) != 1 || !slices.Contains(tarEntries(t, chart[0], true), "global-discovery-mcs/Chart.yaml") {
		t.Errorf("chart package %v lacks global-discovery-mcs/Chart.yaml", chart)
	}
	image := filepath.Join(dist, "global-discovery-mcs-v9.9.9-rel-image.oci.tar")
	if !slices.Contains(tarEntries(t, image, false), "index.json") {
		t.Errorf("%s is not an OCI image layout", image)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s has another sum", name)
		}
		listed++
	}
	if listed != 3 {
		t.Errorf("SHA256SUMS lists %d files, want the binaries tarball, the chart and the image:\n%s", listed, sums)
	}
}

func tarEntries(t *testing.T, path string, gzipped bool) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gzipped {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r = zr
	}
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		names = append(names, strings.TrimSuffix(h.Name, "/"))
	}
}

// TestReleaseWorkflow reads .github/workflows/release.yaml (it runs only on GitHub): a tag
// runs `make release`, pushes the image for both architectures through buildx with the
// build metadata, pushes the chart to an OCI registry and attaches dist/ to the release.
func TestReleaseWorkflow(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		// YAML 1.1 reads the key `on` as true.
		On   map[string]map[string][]string `json:"true"`
		Jobs map[string]struct {
			Steps []struct {
				Uses string            `json:"uses"`
				Run  string            `json:"run"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("release.yaml: %v", err)
	}
	if len(wf.On["push"]["tags"]) == 0 {
		t.Fatalf("release.yaml does not run on tags: %v", wf.On)
	}
	var runs, pushed string
	for _, s := range wf.Jobs["release"].Steps {
		runs += s.Run + "\n"
		if strings.HasPrefix(s.Uses, "docker/build-push-action") {
			pushed = s.With["platforms"] + " " + s.With["build-args"] + " push=" + s.With["push"]
		}
	}
	for _, want := range []string{"make release VERSION=", "helm push dist/global-discovery-mcs-", "oci://", "gh release create"} {
		if !strings.Contains(runs+string(b), want) {
			t.Errorf("release.yaml does not run %q", want)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "VERSION=", "COMMIT=", "BUILD_DATE=", "push=true"} {
		if !strings.Contains(pushed, want) {
			t.Errorf("release.yaml's image build lacks %q: %s", want, pushed)
		}
	}
}
