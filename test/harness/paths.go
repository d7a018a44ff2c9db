// Package harness starts the real components the project's tests run against, on one
// machine and without Docker: Kubernetes clusters (kube-apiserver and etcd, optionally
// kube-controller-manager) through controller-runtime's envtest, a DynamoDB-compatible
// server (dynoxide), and the project's own binaries as processes.
//
// The Kubernetes binaries and the project's binaries come from `make tools` and
// `make build`; when one is missing, the test fails and says which make target builds it.
package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// RepoRoot returns the repository's root: the nearest parent folder holding go.work.
func RepoRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("no go.work above the working directory")
				return
			}
			dir = parent
		}
	})
	return root, rootErr
}

// binary returns the path of a built binary under the repository, or fails the test with
// the make target that builds it.
func binary(tb testing.TB, rel, target string) string {
	tb.Helper()
	r, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	p := filepath.Join(r, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("harness: %s is missing; run `make %s` first", p, target)
	}
	return p
}

// K8sAssets returns the folder with etcd, kube-apiserver and kube-controller-manager
// (KUBEBUILDER_ASSETS when set, else bin/k8s built by `make tools`).
func K8sAssets(tb testing.TB) string {
	tb.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		binary(tb, filepath.Join("bin", "k8s", b), "tools")
	}
	r, _ := RepoRoot()
	return filepath.Join(r, "bin", "k8s")
}

// Binary returns the path of one of the project's binaries in bin/, built by `make build`.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	return binary(tb, filepath.Join("bin", name), "build")
}
