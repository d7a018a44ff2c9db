package docwalk

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	page := "# Page\n\n## Install\n\n<!-- test: evaluation production; in=members; check=leases -->\n```bash\nhelm install x \\\n  --set a=b\n```\n\n" +
		"1. A step:\n\n   <!-- test: skip: needs a Docker engine; see make image -->\n   ```bash\n   make docker-build\n   ```\n\n" +
		"### Forward\n\n<!-- test: evaluation; in=registry; background -->\n```bash\nkubectl port-forward x 8080:8080\n```\n\n```yaml\nkind: X\n```\n"
	blocks, err := Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4", len(blocks))
	}
	b := blocks[0]
	if b.Section != "Install" || b.Lang != "bash" || b.Body != "helm install x \\\n  --set a=b\n" || b.Mark.In != "members" || b.Mark.Check != "leases" ||
		!b.Mark.On("evaluation") || !b.Mark.On("production") || b.Mark.On("other") {
		t.Errorf("block 1: %+v %+v", b, b.Mark)
	}
	if b := blocks[1]; b.Mark.Skip != "needs a Docker engine; see make image" || b.Body != "make docker-build\n" {
		t.Errorf("the indented, skipped block: %q %+v", b.Body, b.Mark)
	}
	if b := blocks[2]; b.Section != "Forward" || !b.Mark.Background || b.Mark.In != "registry" || b.Mark.On("production") {
		t.Errorf("block 3: %+v %+v", b, b.Mark)
	}
	if b := blocks[3]; b.Mark != nil || b.Lang != "yaml" {
		t.Errorf("an unmarked block: %+v", b)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ page, want string }{
		{"<!-- test: evaluation; where=x -->\n```bash\nx\n```\n", `unknown option "where"`},
		{"<!-- test: skip: -->\n```bash\nx\n```\n", "skip says no reason"},
		{"<!-- test: ; in=host -->\n```bash\nx\n```\n", "names no path"},
		{"<!-- test: evaluation; in= -->\n```bash\nx\n```\n", "in= needs a value"},
		{"<!-- test: evaluation -->\n\n```bash\nx\n```\n", "line 1: a test mark must stand on the line before a code block"},
		{"```bash\nx\n", "line 1: code block not closed"},
		{"text\n<!-- test: evaluation -->", "a test mark with no code block after it"},
	} {
		if _, err := Parse(tc.page); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.page, err, tc.want)
		}
	}
}
