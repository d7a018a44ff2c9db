// Command modproxy makes this repository's Go modules what a user gets from a module proxy:
// each released module at one version, requiring its siblings at that same version, with no
// replace directive and with its siblings' checksums in go.sum.
//
//	modproxy -root DIR -out PROXY [-version V] [-src SRC] [-write]
//
// It writes a file:// GOPROXY to PROXY (module zips made with golang.org/x/mod/zip, as the Go
// command and proxy.golang.org make them from a tag) and prints the version. Without
// -version the version is v0.0.0-dev.<hash of the modules' files>, a version nobody
// publishes, so the module cache never holds two contents under one version. With -src it
// also writes each module's rewritten tree under SRC/<module folder>, ready to build with
// GOWORK=off; with -write it rewrites go.mod and go.sum in the repository itself (the
// release commit, hack/release-modules.sh).
//
// The modules are taken in dependency order (each after the siblings it requires), since a
// module's go.sum holds the hashes of its siblings' zips, which hold their own go.sum.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
)

// released are the module folders that are versioned and published (test, examples and
// tools are not).
var released = []string{"internal", "api", "registry", "gds-client", "controller", "admin"}

func main() {
	root := flag.String("root", ".", "the repository's top folder")
	out := flag.String("out", "", "folder for the file:// module proxy (required)")
	version := flag.String("version", "", "the modules' version (default: v0.0.0-dev.<hash of their files>)")
	src := flag.String("src", "", "also write each module's rewritten tree under this folder")
	write := flag.Bool("write", false, "rewrite go.mod and go.sum in the repository (a release commit)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "modproxy: -out is required")
		os.Exit(2)
	}
	v, err := run(*root, *out, *version, *src, *write)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}

// mod is one released module as found in the repository.
type mod struct {
	dir   string // folder in the repository, e.g. "registry"
	path  string // module path
	gomod *modfile.File
	files []string // slash paths relative to dir, the module's own files only
	gosum []byte
}

func run(root, out, version, src string, write bool) (string, error) {
	mods, err := load(root)
	if err != nil {
		return "", err
	}
	if version == "" {
		version, err = devVersion(root, mods)
		if err != nil {
			return "", err
		}
	}
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return "", fmt.Errorf("version %q is not a canonical semantic version (vX.Y.Z[-pre])", version)
	}
	ordered, err := dependencyOrder(mods)
	if err != nil {
		return "", err
	}
	sums := map[string][]string{} // module path -> its go.sum lines at version
	for _, m := range ordered {
		gomod, gosum, err := rewrite(m, mods, version, sums)
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.dir, err)
		}
		zipHash, err := writeModule(root, out, m, version, gomod, gosum)
		if err != nil {
			return "", fmt.Errorf("%s: %w", m.dir, err)
		}
		modHash, err := goModHash(gomod)
		if err != nil {
			return "", err
		}
		sums[m.path] = []string{
			fmt.Sprintf("%s %s %s", m.path, version, zipHash),
			fmt.Sprintf("%s %s/go.mod %s", m.path, version, modHash),
		}
		if src != "" {
			if err := writeTree(root, filepath.Join(src, m.dir), m, gomod, gosum); err != nil {
				return "", fmt.Errorf("%s: %w", m.dir, err)
			}
		}
		if write {
			if err := os.WriteFile(filepath.Join(root, m.dir, "go.mod"), gomod, 0o644); err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(root, m.dir, "go.sum"), gosum, 0o644); err != nil {
				return "", err
			}
		}
	}
	return version, nil
}

func load(root string) (map[string]*mod, error) {
	mods := map[string]*mod{}
	for _, dir := range released {
		data, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(dir+"/go.mod", data, nil)
		if err != nil {
			return nil, err
		}
		gosum, err := os.ReadFile(filepath.Join(root, dir, "go.sum"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		files, err := moduleFiles(root, dir)
		if err != nil {
			return nil, fmt.Errorf("%s: listing files: %w", dir, err)
		}
		mods[f.Module.Mod.Path] = &mod{dir: dir, path: f.Module.Mod.Path, gomod: f, files: files, gosum: gosum}
	}
	return mods, nil
}

// moduleFiles lists what a commit of the folder holds: git's tracked and not-ignored files
// when the repository is a git work tree, else every file (a build context without .git).
// Files of nested modules are left to modzip, which omits them as the Go command does.
func moduleFiles(root, dir string) ([]string, error) {
	cmd := exec.Command("git", "-C", filepath.Join(root, dir), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if outp, err := cmd.Output(); err == nil {
		var files []string
		for _, p := range strings.Split(string(outp), "\x00") {
			if p == "" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(root, dir, p)); err != nil {
				continue // deleted in the work tree
			}
			files = append(files, p)
		}
		sort.Strings(files)
		return files, nil
	} else if !strings.Contains(stderr.String(), "not a git repository") && !errors.Is(err, exec.ErrNotFound) {
		return nil, fmt.Errorf("git ls-files: %w: %s", err, stderr.String())
	}
	var files []string
	base := filepath.Join(root, dir)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// devVersion names the modules' current content: the same files give the same version.
func devVersion(root string, mods map[string]*mod) (string, error) {
	h := sha256.New()
	for _, dir := range released {
		for _, m := range mods {
			if m.dir != dir {
				continue
			}
			sum, err := dirhash.Hash1(m.files, func(name string) (io.ReadCloser, error) {
				return os.Open(filepath.Join(root, dir, filepath.FromSlash(name)))
			})
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %s\n", m.path, sum)
		}
	}
	return "v0.0.0-dev." + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// siblings lists the released modules m requires.
func siblings(m *mod, mods map[string]*mod) []string {
	var s []string
	for _, r := range m.gomod.Require {
		if _, ok := mods[r.Mod.Path]; ok {
			s = append(s, r.Mod.Path)
		}
	}
	return s
}

func dependencyOrder(mods map[string]*mod) ([]*mod, error) {
	var order []*mod
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(p string) error
	visit = func(p string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("modules require each other in a cycle through %s", p)
		case 2:
			return nil
		}
		state[p] = 1
		for _, s := range siblings(mods[p], mods) {
			if err := visit(s); err != nil {
				return err
			}
		}
		state[p] = 2
		order = append(order, mods[p])
		return nil
	}
	for _, dir := range released { // a stable order among independent modules
		for p, m := range mods {
			if m.dir == dir {
				if err := visit(p); err != nil {
					return nil, err
				}
			}
		}
	}
	return order, nil
}

// rewrite returns m's go.mod requiring every sibling at version with no replace of a
// sibling, and its go.sum with the checksums of every sibling in its graph (sums holds the
// lines of the siblings already written).
func rewrite(m *mod, mods map[string]*mod, version string, sums map[string][]string) (gomod, gosum []byte, err error) {
	data, err := m.gomod.Format()
	if err != nil {
		return nil, nil, err
	}
	f, err := modfile.Parse(m.dir+"/go.mod", data, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range siblings(m, mods) {
		if err := f.AddRequire(s, version); err != nil {
			return nil, nil, err
		}
	}
	for _, r := range slices.Clone(f.Replace) {
		if _, ok := mods[r.Old.Path]; ok {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, nil, err
			}
		}
	}
	f.Cleanup()
	if gomod, err = f.Format(); err != nil {
		return nil, nil, err
	}

	// The siblings reachable from m, through the siblings' own requirements.
	reach := map[string]bool{}
	var walk func(p string)
	walk = func(p string) {
		for _, s := range siblings(mods[p], mods) {
			if !reach[s] {
				reach[s] = true
				walk(s)
			}
		}
	}
	walk(m.path)
	var lines []string
	for _, l := range strings.Split(string(m.gosum), "\n") {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		if _, sibling := mods[fields[0]]; sibling {
			continue // replaced below
		}
		lines = append(lines, l)
	}
	for s := range reach {
		lines = append(lines, sums[s]...)
	}
	sort.Slice(lines, func(i, j int) bool { return sumLess(lines[i], lines[j]) })
	if len(lines) > 0 {
		gosum = []byte(strings.Join(lines, "\n") + "\n")
	}
	return gomod, gosum, nil
}

// sumLess orders go.sum lines as the Go command writes them: by module path, then version
// (semantic order, "/go.mod" after the zip's line).
func sumLess(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if fa[0] != fb[0] {
		return fa[0] < fb[0]
	}
	va, ma := strings.CutSuffix(fa[1], "/go.mod")
	vb, mb := strings.CutSuffix(fb[1], "/go.mod")
	if c := semver.Compare(va, vb); c != 0 {
		return c < 0
	}
	return !ma && mb
}
