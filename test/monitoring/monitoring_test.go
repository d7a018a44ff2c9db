// Package monitoring checks what the chart ships for monitoring: the alerts pass
// `promtool check rules` and their unit tests (`promtool test rules`), the Grafana dashboard
// is valid JSON in the layout Grafana loads, and every metric an alert or a panel reads is a
// metric of the configuration reference.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func files(t *testing.T) (root, alerts, dashboard string) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "charts", "global-discovery-mcs", "files")
	return root, filepath.Join(dir, "alerts.yaml"), filepath.Join(dir, "dashboard.json")
}

func TestAlertRules(t *testing.T) {
	_, alerts, _ := files(t)
	promtool := harness.Binary(t, "promtool")
	if out, err := exec.Command(promtool, "check", "rules", alerts).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestEveryAlertTested: each alert of the rule file has a unit test that expects it to fire.
func TestEveryAlertTested(t *testing.T) {
	_, alerts, _ := files(t)
	rules, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(names) < 5 {
		t.Fatalf("only %d alerts found", len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(tests), "alertname: "+n[1]+"\n        exp_alerts:\n          - exp_labels") {
			t.Errorf("alert %s has no test that expects it to fire", n[1])
		}
	}
}

// TestEveryAlertHasARunbook: each alert's runbook_url is its own section of
// docs/monitoring.md (a heading with the alert's name, whose anchor GitHub writes in lower
// case), and every section of an alert there is an alert of the rule file.
func TestEveryAlertHasARunbook(t *testing.T) {
	root, alerts, _ := files(t)
	rules, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/ai-dynamo/global-discovery-mcs/blob/main/docs/monitoring.md#"
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (MCS\w+)$`).FindAllStringSubmatch(string(doc), -1) {
		headings[m[1]] = true
	}
	blocks := regexp.MustCompile(`(?m)^\s*- alert: `).Split(string(rules), -1)[1:]
	if len(blocks) < 5 {
		t.Fatalf("only %d alerts found", len(blocks))
	}
	for _, b := range blocks {
		name := strings.Fields(b)[0]
		if !strings.Contains(b, `runbook_url: "`+base+strings.ToLower(name)+`"`) {
			t.Errorf("alert %s has no runbook_url %s%s", name, base, strings.ToLower(name))
		}
		if !headings[name] {
			t.Errorf("alert %s has no section \"### %s\" in docs/monitoring.md", name, name)
		}
		delete(headings, name)
	}
	for h := range headings {
		t.Errorf("docs/monitoring.md has a section for %s, which is no alert", h)
	}
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		GridPos *struct {
			W, H int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboard(t *testing.T) {
	root, alerts, path := files(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["clusterset"] {
		t.Errorf("dashboard variables %v; want datasource and clusterset", vars)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.GridPos == nil || p.GridPos.W == 0 {
			t.Errorf("panel %q has no position", p.Title)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	rules, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`\b((?:mcs|gds)_[a-z0-9_]+)`)
	for _, m := range metric.FindAllStringSubmatch(strings.Join(exprs, "\n")+"\n"+string(rules), -1) {
		name := strings.TrimSuffix(m[1], "_bucket")
		if !strings.Contains(string(ref), "`"+name+"`") {
			t.Errorf("%s is read by an alert or a panel but is not a metric of docs/configuration.md", m[1])
		}
	}
}
