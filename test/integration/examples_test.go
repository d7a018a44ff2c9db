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
// `npm pack`, the Python package installed by pip. Each watches as the controller does
// (cluster deltas, snapshots in pages) through its language's helper, and must list the
// registered cluster, get the whole snapshot though it comes in pages, then a new export
// and an endpoint change made after it started, each applied to what it holds.
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
	put := func(name, addr string) {
		t.Helper()
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "use1-a",
			Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: name}, Spec: relaySpec(80), EndpointGroups: endpoints(addr)}); err != nil {
			t.Fatalf("PutExport %s: %v", name, err)
		}
	}
	put("router", "10.1.0.1")
	put("gateway", "10.1.0.2")
	examples := map[string][]string{
		"go":         {goExample, "--registry", reg.GRPCAddr},
		"typescript": {"node", nodeExample, "--registry", "http://" + reg.GRPCAddr},
		"python":     {python, filepath.Join(root, "examples", "python", "watch_imports.py"), "--registry", reg.GRPCAddr},
	}
	for name, argv := range examples {
		t.Run(name, func(t *testing.T) {
			// Pages of one import: the snapshot takes two messages or more.
			argv = append(argv, "--clusterset", "prod", "--events", "3", "--page-size", "1")
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
			if got := jsonString(next()); !strings.Contains(got, `"snapshot":true`) || !strings.Contains(got, `"dynamo/router":{"use1-a":[`) || !strings.Contains(got, `"dynamo/gateway":{"use1-a":["10.1.0.2"]}`) {
				t.Fatalf("%s example's first change is not the whole snapshot (every page) with dynamo/router and dynamo/gateway: %s", name, got)
			}
			// A new export after the snapshot arrives as a delta with its header.
			service := "pool-" + name
			put(service, "10.1.0.3")
			if got := jsonString(next()); strings.Contains(got, `"snapshot":true`) || !strings.Contains(got, `"dynamo/`+service+`":{"use1-a":["10.1.0.3"]}`) {
				t.Fatalf("%s example's delta lacks dynamo/%s: %s", name, service, got)
			}
			// An endpoint change: a cluster delta, applied to the import held.
			addr := map[string]string{"go": "10.1.0.11", "typescript": "10.1.0.12", "python": "10.1.0.13"}[name]
			put("router", addr)
			if got := jsonString(next()); !strings.Contains(got, `"upserts":["dynamo/router"]`) || !strings.Contains(got, `"dynamo/router":{"use1-a":["`+addr+`"]}`) {
				t.Fatalf("%s example's view after router's endpoint change: %s", name, got)
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
	// As a user builds it: alone (GOWORK=off), the API module from a module proxy made of
	// this tree at a version of its own.
	proxy, version := harness.ModuleProxy(t, "")
	src := filepath.Join(tmp, "example-go-src")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(root, "examples", "go"))); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "example-go")
	goproxy, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -trimpath -buildvcs=false",
		"GONOSUMDB="+strings.TrimSuffix(harness.ModulePrefix, "/"), "GOPROXY="+proxy+","+strings.TrimSpace(string(goproxy)))
	for _, args := range [][]string{
		{"mod", "edit", "-require=" + harness.ModulePrefix + "api@" + version},
		{"build", "-o", out, "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = src
		cmd.Env = env
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("examples/go: go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
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
	for _, f := range []string{"package.json", "README.md", "dist/src/globaldiscoverymcs/registry/v1/registry_pb.js", "dist/src/globaldiscoverymcs/registry/v1/registry_pb.d.ts", "src/globaldiscoverymcs/registry/v1/registry_pb.ts", "lib/importdelta.ts", "dist/lib/importdelta.js", "dist/lib/importdelta.d.ts"} {
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
