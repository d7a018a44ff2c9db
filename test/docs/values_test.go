package docs

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestEveryChartValueDocumented: every value of the chart's values.yaml (each leaf, a map
// given empty being a leaf) is in the chart README's table, as `a.b.c`.
func TestEveryChartValueDocumented(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "global-discovery-mcs")
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			leaves = append(leaves, prefix)
			return
		}
		for k, sub := range m {
			walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
		}
	}
	walk("", values)
	sort.Strings(leaves)
	if len(leaves) < 50 {
		t.Fatalf("found %d values: the walk no longer matches values.yaml", len(leaves))
	}
	names := documentedValues(string(readme))
	for _, l := range leaves {
		if !documented(names, l) {
			t.Errorf("chart value %s is not in charts/global-discovery-mcs/README.md", l)
		}
	}
}

// documentedValues reads the first cell of each row of the README's tables, where
// "`registry.limits.maxWatches` / `maxWatchesPerClient`" names two values (a name with no
// dot is a sibling of the first) and `<component>.x` is registry.x and controller.x.
func documentedValues(readme string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(readme, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line[1:], "|", 2)[0]
		var first string
		for i, tok := range strings.Split(cell, "`") {
			if i%2 == 0 || tok == "" {
				continue
			}
			if first == "" {
				first = tok
			} else if !strings.Contains(tok, ".") && strings.Contains(first, ".") {
				tok = first[:strings.LastIndex(first, ".")+1] + tok
			}
			for _, c := range []string{"registry", "controller"} {
				names[strings.ReplaceAll(tok, "<component>", c)] = true
			}
		}
	}
	return names
}

// documented: the value, or a map value that holds it (`podSecurityContext` documents
// podSecurityContext.runAsUser), is named.
func documented(names map[string]bool, path string) bool {
	for p := path; ; {
		if names[p] {
			return true
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}
