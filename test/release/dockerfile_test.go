package release

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestDockerfileBuildStageReplays builds the image's binaries as the Dockerfile's build
// stage does, with no Docker engine: buildkit's own parser reads the Dockerfile, and its
// WORKDIR, ARG, COPY and RUN steps run in order in a scratch folder with the local Go
// toolchain — each RUN sees only what the COPY steps before it copied, and `COPY . .`
// copies the context as .dockerignore leaves it. So a module listed in go.work but not
// copied before `go mod download`, a file the build script needs that .dockerignore drops,
// or a build script the stage no longer calls right fails here, not in a user's
// `make docker-build`. Then every file the final stage takes from the build stage must
// exist, and the binaries report the version the stage's ARG gave them.
func TestDockerfileBuildStageReplays(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) != 2 {
		t.Fatalf("the Dockerfile has %d stages; this test knows a build stage and a final stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	// The final stage's COPY --from=<build> sources: what the build stage must make.
	var wants []string
	for _, c := range final.Commands {
		if cp, ok := c.(*instructions.CopyCommand); ok && cp.From == build.Name {
			wants = append(wants, cp.SourcePaths...)
		}
	}
	if len(wants) == 0 {
		t.Fatalf("the final stage copies nothing from stage %q", build.Name)
	}

	scratch := t.TempDir()
	// The build stage's absolute paths live under scratch; its RUN steps name them, so
	// they are rewritten (longest first: /src before /).
	inScratch := func(p string) string { return filepath.Join(scratch, p) }
	var absPaths []string
	ignore := contextIgnore(t, root)
	workdir := "/"
	// What buildx passes: the platform, and the release's --build-arg VERSION.
	args := map[string]string{"TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "BUILDPLATFORM": "linux/" + runtime.GOARCH, "VERSION": "v9.9.9-dockerfile"}
	for _, c := range build.Commands {
		switch cmd := c.(type) {
		case *instructions.WorkdirCommand:
			workdir = cmd.Path
			if !filepath.IsAbs(workdir) {
				t.Fatalf("WORKDIR %s: this test knows absolute paths only", workdir)
			}
			absPaths = append(absPaths, workdir)
			if err := os.MkdirAll(inScratch(workdir), 0o755); err != nil {
				t.Fatal(err)
			}
		case *instructions.ArgCommand:
			for _, a := range cmd.Args {
				if _, set := args[a.Key]; !set && a.Value != nil {
					args[a.Key] = *a.Value
				}
			}
		case *instructions.CopyCommand:
			if cmd.From != "" {
				t.Fatalf("line %d: COPY --from in the build stage: not replayed by this test", cmd.Location()[0].Start.Line)
			}
			dest := cmd.DestPath
			if !filepath.IsAbs(dest) {
				dest = filepath.Join(workdir, dest)
			}
			for _, src := range cmd.SourcePaths {
				copyFromContext(t, root, src, inScratch(dest), strings.HasSuffix(cmd.DestPath, "/") || len(cmd.SourcePaths) > 1, ignore)
			}
		case *instructions.RunCommand:
			line := strings.Join(cmd.CmdLine, " ")
			for _, out := range wants {
				absPaths = append(absPaths, filepath.Dir(out))
			}
			slices.SortFunc(absPaths, func(a, b string) int {
				if d := len(b) - len(a); d != 0 {
					return d
				}
				return strings.Compare(a, b)
			})
			absPaths = slices.Compact(absPaths)
			for _, p := range absPaths {
				if p != "/" {
					line = strings.ReplaceAll(line, p, inScratch(p))
				}
			}
			run := exec.Command("sh", "-c", line)
			run.Dir = inScratch(workdir)
			run.Env = os.Environ()
			for k, v := range args {
				run.Env = append(run.Env, k+"="+v)
			}
			// The golang image sets neither; the module and build caches stay (they only
			// make it faster).
			run.Env = append(run.Env, "GOFLAGS=", "GOWORK=")
			started := time.Now()
			if b, err := run.CombinedOutput(); err != nil {
				t.Fatalf("line %d: RUN %s\n%v\n%s", cmd.Location()[0].Start.Line, strings.Join(cmd.CmdLine, " "), err, b)
			}
			t.Logf("line %d: RUN %s: %s", cmd.Location()[0].Start.Line, strings.Join(cmd.CmdLine, " "), time.Since(started).Round(100*time.Millisecond))
		case *instructions.EnvCommand:
			for _, kv := range cmd.Env {
				args[kv.Key] = kv.Value
			}
		default:
			t.Fatalf("the build stage's %T is not replayed by this test: teach it", c)
		}
	}
	version := args["VERSION"]
	for _, w := range wants {
		p := inScratch(w)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the final stage copies %s from the build stage, which did not make it: %v", w, err)
			continue
		}
		if filepath.Dir(w) == "/out" && !strings.HasSuffix(w, ".yaml") {
			b, err := exec.Command(p, "--version").CombinedOutput()
			if err != nil || !strings.Contains(string(b), version) {
				t.Errorf("%s --version: %v\n%s\nwant the build stage's VERSION %q", w, err, b, version)
			}
		}
	}
	t.Logf("the build stage made %d files: %s", len(wants), strings.Join(wants, " "))
}

func parseDockerfile(t *testing.T, path string) []instructions.Stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return stages
}

// contextIgnore is the build context's .dockerignore, as buildkit reads it.
func contextIgnore(t *testing.T, root string) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

// copyFromContext copies src (a file or folder of the context, relative to root) to dest
// as COPY does: a folder's contents into dest; a file into dest when dest is a folder.
func copyFromContext(t *testing.T, root, src, dest string, destIsDir bool, ignore *patternmatcher.PatternMatcher) {
	t.Helper()
	from := filepath.Join(root, filepath.Clean("/"+src))
	info, err := os.Stat(from)
	if err != nil {
		t.Fatalf("COPY %s: not in the build context: %v", src, err)
	}
	if !info.IsDir() {
		if rel, _ := filepath.Rel(root, from); ignored(ignore, rel) {
			t.Fatalf("COPY %s: .dockerignore leaves it out of the build context", src)
		}
		to := dest
		if destIsDir {
			to = filepath.Join(dest, filepath.Base(from))
		}
		copyFile(t, from, to, info.Mode())
		return
	}
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." && ignored(ignore, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		sub, _ := filepath.Rel(from, p)
		to := filepath.Join(dest, sub)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			copyFile(t, p, to, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
}

// ignored applies .dockerignore to a context path. A folder that is ignored as a whole is
// skipped; buildkit would still look inside it for re-included (!) paths, which ours has none of.
func ignored(pm *patternmatcher.PatternMatcher, rel string) bool {
	m, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
	return err == nil && m
}

func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
