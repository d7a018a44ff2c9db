// Package docs checks the documentation against the repository: every link resolves, every
// path the deployment guide names exists, and its Helm commands render.
package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/test/docwalk"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// markdownFiles are the documents users read.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	r := root(t)
	files, err := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(files, filepath.Join(r, "README.md"), filepath.Join(r, "charts", "global-discovery-mcs", "README.md"))
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	return strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(stripCode(string(raw)), -1) {
		out[slug(m[1])] = true
	}
	return out
}

// stripCode drops fenced code blocks, whose lines are not headings.
func stripCode(s string) string {
	var out []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLinks: every relative link of the documents names a file that exists, and every
// #anchor a heading of that file.
func TestLinks(t *testing.T) {
	for _, f := range markdownFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", rel(t, f), target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %q: no heading #%s in %s", rel(t, f), target, anchor, rel(t, path))
			}
		}
	}
}

func rel(t *testing.T, p string) string {
	r, err := filepath.Rel(root(t), p)
	if err != nil {
		return p
	}
	return r
}

var (
	repoPathRE = regexp.MustCompile("(?:^|[\\s`(=])((?:charts|gds-client|docs|hack|controller|registry|admin|api|test)/[A-Za-z0-9._/-]*[A-Za-z0-9_/])")
	binRE      = regexp.MustCompile("(?:^|[\\s`])bin/([a-z0-9-]+)")
	makeRE     = regexp.MustCompile("^make ((?:[a-z][a-z0-9-]* ?)+)")
	inlineRE   = regexp.MustCompile("`([^`]+)`")
)

// TestDeployGuidePaths: every repository path, binary and make target docs/deploy.md names
// exists.
func TestDeployGuidePaths(t *testing.T) {
	r := root(t)
	raw, err := os.ReadFile(filepath.Join(r, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	paths := 0
	for _, m := range repoPathRE.FindAllStringSubmatch(doc, -1) {
		paths++
		if _, err := os.Stat(filepath.Join(r, m[1])); err != nil {
			t.Errorf("docs/deploy.md names %s: %v", m[1], err)
		}
	}
	if paths < 5 {
		t.Fatalf("found only %d repository paths in docs/deploy.md; the pattern is broken", paths)
	}
	build, err := os.ReadFile(filepath.Join(r, "hack", "build-binaries.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range binRE.FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(string(build), m[1]) {
			t.Errorf("docs/deploy.md names bin/%s, which make build does not build", m[1])
		}
	}
	makefile, err := os.ReadFile(filepath.Join(r, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	// make commands: in bash blocks and in inline code.
	var lines []string
	lines = append(lines, shellCommands(doc)...)
	for _, m := range inlineRE.FindAllStringSubmatch(stripCode(doc), -1) {
		lines = append(lines, m[1])
	}
	targets := 0
	for _, l := range lines {
		m := makeRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		targets++
		for _, target := range strings.Fields(m[1]) {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
				t.Errorf("docs/deploy.md runs make %s, which the Makefile lacks", target)
			}
		}
	}
	if targets == 0 {
		t.Error("found no make command in docs/deploy.md; the pattern is broken")
	}
}

// TestDeployGuideHelmCommands: every helm install of docs/deploy.md renders with the
// repository's chart (as helm template, with the same flags).
func TestDeployGuideHelmCommands(t *testing.T) {
	r := root(t)
	raw, err := os.ReadFile(filepath.Join(r, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := 0
	for _, cmd := range shellCommands(string(raw)) {
		if !strings.HasPrefix(cmd, "helm install ") {
			continue
		}
		cmds++
		args := splitArgs(strings.TrimPrefix(cmd, "helm install "))
		c := exec.Command(harness.Binary(t, "helm"), append([]string{"template"}, args...)...)
		c.Dir = r
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("%s\n: %v\n%s", cmd, err, out)
		}
	}
	// The manual's installs: the registry (evaluation, production) and the controller
	// (TLS, plaintext); in the registry's cluster the page adds the controller with helm
	// upgrade, which test/nodes runs.
	if cmds < 4 {
		t.Fatalf("found %d helm install commands in docs/deploy.md, want the manual's 4 or more", cmds)
	}
}

// shellCommands returns the commands of the bash blocks, continuation lines joined.
func shellCommands(doc string) []string {
	var out []string
	in := false
	cur := ""
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "```bash"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in:
			l = strings.TrimSpace(l)
			if strings.HasSuffix(l, "\\") {
				cur += strings.TrimSuffix(l, "\\")
				continue
			}
			out = append(out, strings.TrimSpace(cur+l))
			cur = ""
		}
	}
	return out
}

// splitArgs splits a command line on spaces, honouring single quotes.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, sawAny := false, false
	for _, c := range s {
		switch {
		case c == '\'':
			quoted, sawAny = !quoted, true
		case c == ' ' && !quoted:
			if sawAny {
				out = append(out, cur.String())
				cur.Reset()
				sawAny = false
			}
		default:
			cur.WriteRune(c)
			sawAny = true
		}
	}
	if sawAny {
		out = append(out, cur.String())
	}
	return out
}

var (
	// Metric names as the code declares them: opts structs and descriptors.
	metricNameRE = regexp.MustCompile(`(?:Name:\s*|NewDesc\()"((?:mcs|gds)_[a-z0-9_]+)"`)
	// Flags as the binaries declare them: flag and pflag definitions.
	flagRE    = regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Duration|Float64|Uint|StringSlice|StringArray)(?:Var)?P?\((?:&[\w.]+,\s*)?"([a-z][a-z0-9-]+)"`)
	flagVarRE = regexp.MustCompile(`\.Var\([^,]+,\s*"([a-z][a-z0-9-]+)"`)
	aliasRE   = regexp.MustCompile(`[aA]lias\([^,]+,\s*(?:&[\w.]+,\s*)?"([a-z][a-z0-9-]+)",\s*"([a-z][a-z0-9-]+)"`)
)

// codeNames returns the metrics and the flags the binaries define, each with the file that
// defines it.
func codeNames(t *testing.T) (metrics, flags map[string]string) {
	t.Helper()
	r := root(t)
	metrics, flags = map[string]string{}, map[string]string{}
	for _, mod := range []string{"registry", "controller", "admin", "gds-client", "internal"} {
		err := filepath.WalkDir(filepath.Join(r, mod), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(r, path)
			for _, m := range metricNameRE.FindAllStringSubmatch(string(src), -1) {
				metrics[m[1]] = rel
			}
			// Flags are defined in main packages, the admin CLI, the controller's app and
			// the flags every binary shares (internal/command); an earlier name is an
			// alias (command.Alias, the admin CLI's alias).
			if strings.Contains(rel, "/cmd/") || strings.Contains(rel, "/internal/cli/") || strings.Contains(rel, "controller/internal/app/") || strings.HasPrefix(rel, "internal/command/") {
				for _, re := range []*regexp.Regexp{flagRE, flagVarRE, aliasRE} {
					for _, m := range re.FindAllStringSubmatch(string(src), -1) {
						for _, name := range m[1:] {
							if name != "" {
								flags[name] = rel
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(metrics) < 20 || len(flags) < 40 {
		t.Fatalf("found %d metrics and %d flags in the code: the patterns no longer match it", len(metrics), len(flags))
	}
	return metrics, flags
}

// TestReferenceComplete: every metric and every flag the binaries define is in the
// configuration reference ("a flag or metric that is not in the reference does not exist").
func TestReferenceComplete(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join(root(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, flags := codeNames(t)
	for name, file := range metrics {
		if !strings.Contains(string(ref), "`"+name+"`") {
			t.Errorf("metric %s (%s) is not in docs/configuration.md", name, file)
		}
	}
	for name, file := range flags {
		if !strings.Contains(string(ref), "`--"+name) {
			t.Errorf("flag --%s (%s) is not in docs/configuration.md", name, file)
		}
	}
}

// otherTools' flags are the long flags of the other commands the documents run (helm,
// kubectl, curl, go, aws, openssl, buf, promtool, gotestsum, ...): a flag a document names
// is one of ours or one of these.
var otherTools = map[string]bool{
	"namespace": true, "create-namespace": true, "set": true, "set-string": true, "set-file": true, "values": true, "version": true,
	"wait": true, "reuse-values": true, "reset-then-reuse-values": true, "kube-context": true, "dry-run": true, "debug": true, "atomic": true, "install": true,
	"context": true, "kubeconfig": true, "replicas": true, "output": true, "selector": true, "all-namespaces": true,
	"for": true, "timeout": true, "image": true, "restart": true, "rm": true, "from-file": true, "from-literal": true,
	"cert": true, "key": true, "cacert": true, "resolve": true, "silent": true, "fail": true, "data": true, "header": true,
	"request": true, "show-error": true, "cluster": true, "type": true, "name": true, "filename": true, "overwrite": true,
	"help": true, "region": true, "table-name": true, "endpoint-url": true, "profile": true, "query": true, "tls": true,
	"recursive": true, "force": true, "grace-period": true, "to-revision": true, "revision": true, "destination": true,
	"for-each": true, "insecure": true, "output-sync": true, "jsonfile": true, "format": true, "no-print-directory": true,
	"short": true, "raw": true, "template": true, "show-only": true, "skip-crds": true, "no-hooks": true, "ignore-not-found": true,
	"max-time": true, "retry": true, "ca-file": true, "server": true, "local": true, "level": true, "privileged": true,
	"quiet": true, "verbose": true, "stdin": true, "tty": true, "cascade": true, "approve": true, "role": true, "against": true,
	"out": true, "subj": true, "days": true, "newkey": true, "nodes": true, "keyout": true, "addext": true, "text": true, "noout": true,
	"resource-name": true, "serviceaccount": true, "verb": true, "as": true, "list": true, "sort-by": true, "watch": true,
	"attach-policy-arn": true, "approve-all": true, "override-existing-serviceaccounts": true, "role-only": true, "role-name": true,
	"policy-arn": true, "policy-document": true, "policy-name": true, "assume-role-policy-document": true,
	"server-side": true, "address": true, "replica-updates": true,
	// The syntax of flags, not a flag.
	"flag": true,
}

// TestDocsNameWhatExists: every flag, metric and chart value a document names exists —
// a flag of ours (or of a tool it runs), a metric of the code, a value of the chart.
func TestDocsNameWhatExists(t *testing.T) {
	metrics, flags := codeNames(t)
	values := chartValues(t)
	// A name that ends in "-" or is followed by "*" is a family (`--registry-tls-*-file`).
	flagInDoc := regexp.MustCompile(`(?:^|[\s\x60'"(\[])--([a-z][a-z0-9-]*[a-z0-9])(?:[^a-z0-9*-]|$)`)
	metricInDoc := regexp.MustCompile(`\b((?:mcs|gds)_[a-z0-9_]+[a-z0-9])\b`)
	valueInDoc := regexp.MustCompile(`\x60((?:registry|controller|image|serviceMonitor|prometheusRule|grafanaDashboard|imagePullSecrets|podSecurityContext|securityContext)(?:\.[A-Za-z0-9]+)+)(?:[=\x60])`)
	for _, file := range markdownFiles(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, name := string(raw), rel(t, file)
		for _, m := range flagInDoc.FindAllStringSubmatch(doc, -1) {
			if f := m[1]; flags[f] == "" && !otherTools[f] {
				t.Errorf("%s names the flag --%s, which no binary defines", name, f)
			}
		}
		for _, m := range metricInDoc.FindAllStringSubmatch(doc, -1) {
			n := m[1]
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
			if metrics[n] == "" && metrics[base] == "" && !strings.HasSuffix(n, "_") {
				t.Errorf("%s names the metric %s, which the code does not define", name, n)
			}
		}
		for _, m := range valueInDoc.FindAllStringSubmatch(doc, -1) {
			if !values[m[1]] {
				t.Errorf("%s names the chart value %s, which values.yaml does not have", name, m[1])
			}
		}
	}
}

// chartValues are the chart's value paths ("controller.registryUrls"), every level of
// values.yaml.
func chartValues(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), "charts", "global-discovery-mcs", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, x := range m {
			out[prefix+k] = true
			if sub, ok := x.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", v)
	if len(out) < 30 {
		t.Fatalf("values.yaml has only %d values", len(out))
	}
	return out
}

// TestOpenAPIInfo: the OpenAPI document says what it is and which version, not the proto
// file's path.
func TestOpenAPIInfo(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root(t), "api", "gen", "openapi", "registry.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info struct{ Title, Version string }
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info.Title != "global-discovery-mcs registry" || doc.Info.Version != "v1" {
		t.Errorf("OpenAPI info = %+v", doc.Info)
	}
}

// TestDeployGuideBlocksMarked: every command of docs/deploy.md says how test/nodes runs it
// (test/docwalk), or why no test does, so a new command cannot go untested unnoticed.
func TestDeployGuideBlocksMarked(t *testing.T) {
	blocks, err := docwalk.ReadFile(filepath.Join(root(t), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	run := map[string]int{}
	for _, b := range blocks {
		where := fmt.Sprintf("docs/deploy.md:%d (%s)", b.Line, b.Section)
		switch {
		case b.Mark == nil:
			t.Errorf("%s: a %s block without a test mark", where, b.Lang)
			continue
		case b.Mark.Skip != "":
			continue
		}
		for _, p := range b.Mark.Paths {
			if p != "evaluation" && p != "production" {
				t.Errorf("%s: unknown path %q (evaluation, production)", where, p)
			}
			run[p]++
		}
		if in := b.Mark.In; !slices.Contains([]string{"host", "registry", "members", "use1-a", "usw2-a", "euw1-a"}, in) {
			t.Errorf("%s: in=%s is none of host, registry, members or a cluster of test/nodes", where, in)
		}
		if b.Mark.Apply != (b.Lang == "yaml") {
			t.Errorf("%s: apply marks the YAML blocks, and only them", where)
		}
	}
	if run["evaluation"] < 15 || run["production"] < 15 {
		t.Fatalf("the paths run %v blocks; the page has more: is the parser broken?", run)
	}
}
