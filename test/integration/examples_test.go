package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestExamples runs examples/ (Go, TypeScript, Python) against a real registry, each
// through its client as a user installs it: the Go module, the npm package built by
// `npm pack`, the Python package installed by pip. Each must list the registered cluster,
// get the watch's snapshot, then the delta of an export made after it started.
func TestExamples(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	reg := harness.StartRegistry(t, "--store=memory")

	tmp := t.TempDir()
	goExample := buildGoExample(t, root, tmp)
	nodeExample := buildTSExample(t, root, tmp)
	python := installPythonPackage(t, root, tmp)
	// The cluster registers after the builds, which can outlast its lease on a busy machine.
	c := dial(t, reg.GRPCAddr)
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "use1-a", Region: "us-east-1"}); err != nil {
		t.Fatalf("RegisterCluster: %v", err)
	}
	put := func(name string) {
		t.Helper()
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name}, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1")}); err != nil {
			t.Fatalf("PutExport %s: %v", name, err)
		}
	}
	put("router")
	examples := map[string][]string{
		"go":         {goExample, "--registry", reg.GRPCAddr},
		"typescript": {"node", nodeExample, "--registry", "http://" + reg.GRPCAddr},
		"python":     {python, filepath.Join(root, "examples", "python", "watch_imports.py"), "--registry", reg.GRPCAddr},
	}
	for name, argv := range examples {
		t.Run(name, func(t *testing.T) {
			argv = append(argv, "--clusterset", "prod", "--events", "2")
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start %v: %v", argv, err)
			}
			lines := bufio.NewScanner(stdout)
			next := func() map[string]any {
				t.Helper()
				if !lines.Scan() {
					_ = cmd.Wait()
					t.Fatalf("%s example ended early: %v\n%s", name, lines.Err(), stderr.String())
				}
				var v map[string]any
				if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
					t.Fatalf("%s example printed %q: %v", name, lines.Text(), err)
				}
				return v
			}
			if got := jsonString(next()); !strings.Contains(got, `"clusterId":"use1-a"`) || !strings.Contains(got, `"state":"LEASE_STATE_ACTIVE"`) {
				t.Fatalf("%s example's clusters: %s", name, got)
			}
			if got := jsonString(next()); !strings.Contains(got, `"snapshot":true`) || !strings.Contains(got, `"dynamo/router"`) {
				t.Fatalf("%s example's first watch message is not the snapshot with dynamo/router: %s", name, got)
			}
			// A change after the snapshot arrives as a delta.
			service := "pool-" + name
			put(service)
			if got := jsonString(next()); strings.Contains(got, `"snapshot":true`) || !strings.Contains(got, `"dynamo/`+service+`"`) {
				t.Fatalf("%s example's delta lacks dynamo/%s: %s", name, service, got)
			}
			_, _ = io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s example exited with %v after its events\n%s", name, err, stderr.String())
			}
		})
	}
}

func jsonString(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// buildGoExample builds examples/go as its own module (GOWORK=off: as a user's program
// sees the api module).
func buildGoExample(t *testing.T, root, tmp string) string {
	t.Helper()
	out := filepath.Join(tmp, "example-go")
	build := exec.Command("go", "build", "-o", out, ".")
	build.Dir = filepath.Join(root, "examples", "go")
	build.Env = append(os.Environ(), "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/go: %v\n%s", err, b)
	}
	return out
}

// buildTSExample packs the npm package (its prepack script compiles the JavaScript and
// type declarations), checks the tarball holds them, and builds examples/ts against the
// package, which npm's workspace links into node_modules.
func buildTSExample(t *testing.T, root, tmp string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@ai-dynamo", "global-discovery-mcs-api")); err != nil {
		t.Fatalf("the npm workspace is not installed (run `make tools`): %v", err)
	}
	pack := exec.Command("npm", "pack", "--json", "--pack-destination", tmp, "--workspace", "api/gen/ts")
	pack.Dir = root
	b, err := pack.Output()
	if err != nil {
		t.Fatalf("npm pack api/gen/ts: %v\n%s", err, b)
	}
	var packed []struct {
		Name, Version string
		Files         []struct{ Path string }
	}
	if err := json.Unmarshal(b, &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json printed %s: %v", b, err)
	}
	files := map[string]bool{}
	for _, f := range packed[0].Files {
		files[f.Path] = true
	}
	for _, f := range []string{"package.json", "README.md", "dist/globaldiscoverymcs/registry/v1/registry_pb.js", "dist/globaldiscoverymcs/registry/v1/registry_pb.d.ts", "src/globaldiscoverymcs/registry/v1/registry_pb.ts"} {
		if !files[f] {
			t.Errorf("npm package %s@%s lacks %s (has %v)", packed[0].Name, packed[0].Version, f, files)
		}
	}
	tsc := exec.Command(filepath.Join(root, "node_modules", ".bin", "tsc"), "-p", ".")
	tsc.Dir = filepath.Join(root, "examples", "ts")
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc examples/ts: %v\n%s", err, b)
	}
	return filepath.Join(root, "examples", "ts", "dist", "main.js")
}

// installPythonPackage installs api/gen/python with pip into a virtual environment that
// sees Debian's protobuf and grpcio (no index: its declared dependencies must already be
// met), and returns the environment's python.
func installPythonPackage(t *testing.T, root, tmp string) string {
	t.Helper()
	venv := filepath.Join(tmp, "venv")
	if b, err := exec.Command("/usr/bin/python3", "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, b)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--quiet", filepath.Join(root, "api", "gen", "python"))
	pip.Dir = tmp
	if b, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install api/gen/python: %v\n%s", err, b)
	}
	python := filepath.Join(venv, "bin", "python")
	// The stubs and the PEP 561 marker are installed with the code.
	check := exec.Command(python, "-c", "import importlib.resources as r, globaldiscoverymcs.registry.v1 as v; "+
		"p = r.files(v); assert (p / 'registry_pb2.pyi').is_file() and (r.files('globaldiscoverymcs') / 'py.typed').is_file(), 'stubs missing'")
	check.Dir = tmp
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("installed Python package: %v\n%s", err, b)
	}
	return python
}
