package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// released are the modules tagged on a release (RELEASING.md), in dependency order.
var released = []string{"internal", "api", "registry", "gds-client", "controller", "admin"}

const modulePrefix = harness.ModulePrefix

// readGoMod parses module m's go.mod in the tree at root.
func readGoMod(t *testing.T, root, m string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, m, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(m+"/go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestModulesInstallFromAProxy takes the modules as a user does once they are tagged:
// tools/modproxy makes a file:// module proxy of this tree at a release version (module
// zips as the Go command makes them from a tag), and an outside module, with GOWORK=off
// and only that proxy before the usual ones, runs `go get` of the API and the client
// library and `go install` of the registry and the controller at that version. A replace
// directive in a released go.mod, a sibling required at a version that is not released with
// it, or a go.sum without a sibling's checksum fails here.
func TestModulesInstallFromAProxy(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range released {
		f := readGoMod(t, root, m)
		// `go install module@version` refuses a module whose go.mod has one.
		for _, r := range f.Replace {
			t.Errorf("%s/go.mod replaces %s: a released module carries no replace directive (go.work joins the modules)", m, r.Old.Path)
		}
	}

	work := t.TempDir()
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	realCache, usualProxy := goEnv("GOMODCACHE"), goEnv("GOPROXY")

	const version = "v1.2.3"
	proxy, _ := harness.ModuleProxy(t, version)

	// A module cache of its own, so this tree's content under a release's version never
	// lands in the machine's cache; the machine's cache serves the third-party modules
	// (its download folder is itself a module proxy).
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-modcacherw -trimpath -buildvcs=false",
		"GOMODCACHE="+filepath.Join(work, "modcache"),
		"GOPROXY="+proxy+",file://"+filepath.Join(realCache, "cache", "download")+","+usualProxy,
		"GONOSUMDB="+strings.TrimSuffix(modulePrefix, "/"),
		"GOBIN="+filepath.Join(work, "bin"),
		"CGO_ENABLED=0",
	)
	consumer := filepath.Join(work, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(consumer, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.26.0\n")
	write("main.go", `package main

import (
	"fmt"

	registryv1 "`+modulePrefix+`api/gen/go/globaldiscoverymcs/registry/v1"
	"`+modulePrefix+`gds-client/discovery"
)

func main() {
	fmt.Println(registryv1.File_globaldiscoverymcs_registry_v1_registry_proto.Path(), discovery.Config{})
}
`)
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(consumer, "get", modulePrefix+"api@"+version, modulePrefix+"gds-client@"+version)
	run(consumer, "mod", "tidy")
	run(consumer, "build", "-o", filepath.Join(work, "consumer-bin"), ".")
	gomod, err := os.ReadFile(filepath.Join(consumer, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"api", "gds-client"} {
		if !strings.Contains(string(gomod), modulePrefix+m+" "+version) {
			t.Errorf("the consumer's go.mod does not require %s at %s:\n%s", m, version, gomod)
		}
	}

	for _, target := range []string{"registry/cmd/mcs-registry", "controller/cmd/mcs-controller"} {
		run(work, "install", modulePrefix+target+"@"+version)
		bin := filepath.Join(work, "bin", filepath.Base(target))
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, out)
		}
		// `go install` stamps the module's version into the binary; ours reads it.
		if !strings.Contains(string(out), version) {
			t.Errorf("%s --version = %q, want the module version %s", filepath.Base(target), out, version)
		}
		t.Logf("go install %s@%s: %s", target, version, strings.TrimSpace(string(out)))
	}
}

// TestReleaseModulesTagsWhatTheGoCommandVerifies runs hack/release-modules.sh in a clone of
// this repository and checks its release commit the way a user's Go command will: the
// checksum each module's go.sum records for a sibling is the hash of the zip the Go
// command makes from that sibling's tag (golang.org/x/mod/zip from git, as
// proxy.golang.org does), every released go.mod requires its siblings at the release with no
// replace directive, and the workspace still builds.
func TestReleaseModulesTagsWhatTheGoCommandVerifies(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "repo")
	gitEnv := append(os.Environ(),
		"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release@example.com",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release@example.com")
	runIn := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = gitEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	runIn(root, "git", "clone", "-q", "--no-hardlinks", root, clone)
	const version = "v1.2.3"
	t.Log(strings.TrimSpace(runIn(clone, "bash", "hack/release-modules.sh", version)))

	zipHash := map[string]string{} // module path -> h1 of its tag's zip
	for _, m := range released {
		zipPath := filepath.Join(t.TempDir(), m+".zip")
		f, err := os.Create(zipPath)
		if err != nil {
			t.Fatal(err)
		}
		mv := module.Version{Path: modulePrefix + m, Version: version}
		if err := modzip.CreateFromVCS(f, mv, clone, m+"/"+version, m); err != nil {
			t.Fatalf("zip of tag %s/%s: %v", m, version, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if zipHash[mv.Path], err = dirhash.HashZip(zipPath, dirhash.Hash1); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range released {
		f := readGoMod(t, clone, m)
		if len(f.Replace) > 0 {
			t.Errorf("%s/go.mod at the release has replace directives", m)
		}
		sum, err := os.ReadFile(filepath.Join(clone, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Require {
			if !strings.HasPrefix(r.Mod.Path, modulePrefix) {
				continue
			}
			if r.Mod.Version != version {
				t.Errorf("%s requires %s at %s, want %s", m, r.Mod.Path, r.Mod.Version, version)
			}
			want := r.Mod.Path + " " + version + " " + zipHash[r.Mod.Path]
			if !strings.Contains(string(sum), want+"\n") {
				t.Errorf("%s/go.sum lacks %q: the Go command would refuse the tag's zip", m, want)
			}
		}
	}
	// The workspace resolves the siblings at the release from their folders.
	runIn(clone, "go", "list", "-m", modulePrefix+"registry", modulePrefix+"api")
	runIn(clone, "go", "build", "./admin/...", "./controller/cmd/...")
}
