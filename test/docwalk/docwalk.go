// Package docwalk reads the commands of a Markdown page with the marks that say how a test
// runs them: docs/deploy.md is run as written by test/nodes, on clusters with real nodes.
//
// A mark is an HTML comment on the line before a code block, invisible on the rendered
// page:
//
//	<!-- test: evaluation production; in=members; check=leases -->
//
// Its first part names the paths (walks of the page) that run the block, or says
// `skip: <why>` (the rest of the mark). Then, separated by semicolons: `in=` where the block runs (`registry`,
// `members`, a cluster's id, or `host`, the default), `check=` a named check of the
// block's output (the block is run again until the check passes), `background` for a
// command that runs until Ctrl-C (a port-forward), and `apply` for a YAML block, applied
// with kubectl.
package docwalk

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Block is one fenced code block of a page.
type Block struct {
	Line    int    // the line of its opening fence, from 1
	Lang    string // bash, yaml, …
	Section string // the nearest heading above it (##, ### …), without the #s
	Body    string // its lines, with the final newline
	Mark    *Mark  // nil when the block has no mark
}

// Mark is how a test runs a block.
type Mark struct {
	Skip       string   // why no test runs it; empty when one does
	Paths      []string // the paths that run it
	In         string   // where: host, registry, members, or a cluster's id
	Check      string   // a named check of the output; empty for none
	Background bool     // runs until stopped (a port-forward)
	Apply      bool     // a YAML block, applied with kubectl
}

// On reports whether path runs the block.
func (m *Mark) On(path string) bool {
	for _, p := range m.Paths {
		if p == path {
			return true
		}
	}
	return false
}

var (
	markRE    = regexp.MustCompile(`^<!-- test: (.*) -->$`)
	headingRE = regexp.MustCompile(`^#{1,6} (.+)$`)
)

// ReadFile parses the page at path.
func ReadFile(path string) ([]Block, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	blocks, err := Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return blocks, nil
}

// Parse returns the page's code blocks in order; a mark it cannot read is an error naming
// its line.
func Parse(page string) ([]Block, error) {
	var (
		out     []Block
		cur     *Block
		indent  string // of the open block's fence: a block in a list item is indented
		section string
		mark    *Mark
	)
	for i, raw := range strings.Split(page, "\n") {
		n := i + 1
		l := strings.TrimLeft(raw, " ")
		if cur != nil {
			if strings.HasPrefix(l, "```") {
				out = append(out, *cur)
				cur = nil
				continue
			}
			cur.Body += strings.TrimPrefix(raw, indent) + "\n"
			continue
		}
		if strings.HasPrefix(l, "```") {
			cur = &Block{Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), Section: section, Mark: mark}
			indent = raw[:len(raw)-len(l)]
			mark = nil
			continue
		}
		if mark != nil {
			return nil, fmt.Errorf("line %d: a test mark must stand on the line before a code block", n-1)
		}
		if m := markRE.FindStringSubmatch(l); m != nil {
			parsed, err := parseMark(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			mark = parsed
			continue
		}
		if m := headingRE.FindStringSubmatch(l); m != nil {
			section = m[1]
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: code block not closed", cur.Line)
	}
	if mark != nil {
		return nil, errors.New("the last line is a test mark with no code block after it")
	}
	return out, nil
}

func parseMark(s string) (*Mark, error) {
	m := &Mark{In: "host"}
	if why, ok := strings.CutPrefix(strings.TrimSpace(s), "skip:"); ok {
		// The rest is the reason, semicolons and all: a skipped block takes no options.
		if m.Skip = strings.TrimSpace(why); m.Skip == "" {
			return nil, fmt.Errorf("test mark %q: skip says no reason", s)
		}
		return m, nil
	}
	parts := strings.Split(s, ";")
	head := strings.TrimSpace(parts[0])
	m.Paths = strings.Fields(head)
	if len(m.Paths) == 0 {
		return nil, fmt.Errorf("test mark %q: names no path", s)
	}
	for _, p := range parts[1:] {
		key, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch key {
		case "in":
			m.In = value
		case "check":
			m.Check = value
		case "background":
			m.Background = true
		case "apply":
			m.Apply = true
		default:
			return nil, fmt.Errorf("test mark %q: unknown option %q (in, check, background, apply)", s, key)
		}
		if (key == "in" || key == "check") && value == "" {
			return nil, fmt.Errorf("test mark %q: %s= needs a value", s, key)
		}
	}
	return m, nil
}
