package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestClientPackageVersions: the npm and Python client packages carry the chart's version,
// so one release number names the chart, the image and the clients of its API.
func TestClientPackageVersions(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	chart := regexp.MustCompile(`(?m)^version: (\S+)$`).FindStringSubmatch(read("charts/global-discovery-mcs/Chart.yaml"))
	if chart == nil {
		t.Fatal("Chart.yaml has no version")
	}
	var npm struct{ Name, Version, Types, License string }
	if err := json.Unmarshal([]byte(read("api/gen/ts/package.json")), &npm); err != nil {
		t.Fatal(err)
	}
	py := regexp.MustCompile(`(?m)^version = "([^"]+)"$`).FindStringSubmatch(read("api/gen/python/pyproject.toml"))
	if py == nil {
		t.Fatal("pyproject.toml has no version")
	}
	if npm.Version != chart[1] || py[1] != chart[1] {
		t.Errorf("versions differ: chart %s, npm %s, Python %s", chart[1], npm.Version, py[1])
	}
	if npm.Name == "" || npm.Types == "" || npm.License != "Apache-2.0" {
		t.Errorf("api/gen/ts/package.json lacks a name, types or the license: %+v", npm)
	}
}
