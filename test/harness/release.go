package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// Release is one release of the project's chart in a cluster's mcs-system namespace, kept
// as an operator keeps one: every install and upgrade passes the same values file, and
// only the chart and the image's tag change. Every node test that installs the chart by
// its own values (not the docs' commands, which the deploy guide's test runs as written)
// goes through it.
type Release struct {
	Cluster *Cluster
	Name    string
	// Values is the values file (WriteValues).
	Values string
	// Deployments are the release's Deployments, waited for after each command.
	Deployments []string
}

// WriteValues writes a values file into the test's temporary directory and returns its path.
func WriteValues(tb testing.TB, name, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name+".yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Install runs `helm install` of chart with the image tag (the namespace created when
// missing) and does not wait: a caller installing several releases waits for them
// together (Available).
func (r Release) Install(tb testing.TB, chart, tag string) {
	tb.Helper()
	r.Cluster.Helm(tb, "install", r.Name, chart, "--namespace", "mcs-system", "--create-namespace", "--values", r.Values, "--set", "image.tag="+tag)
}

// Available waits until every Deployment of the release is available.
func (r Release) Available(tb testing.TB) {
	tb.Helper()
	for _, d := range r.Deployments {
		r.Cluster.WaitDeploymentAvailable(tb, "mcs-system", d)
	}
}

// Upgrade runs `helm upgrade` with the same values and another chart and tag, and waits
// until every Deployment of the release has rolled out.
func (r Release) Upgrade(tb testing.TB, chart, tag string) {
	tb.Helper()
	r.Cluster.Helm(tb, "upgrade", r.Name, chart, "--namespace", "mcs-system", "--values", r.Values, "--set", "image.tag="+tag)
	r.RolledOut(tb)
}

// Rollback returns the release to its first revision and waits until it has rolled out.
func (r Release) Rollback(tb testing.TB) {
	tb.Helper()
	r.Cluster.Helm(tb, "rollback", r.Name, "1", "--namespace", "mcs-system")
	r.RolledOut(tb)
}

// RolledOut waits until every Deployment of the release has rolled out.
func (r Release) RolledOut(tb testing.TB) {
	tb.Helper()
	for _, d := range r.Deployments {
		if out, err := r.Cluster.Kubectl("-n", "mcs-system", "rollout", "status", "deployment/"+d, "--timeout=3m"); err != nil {
			tb.Fatalf("rollout of %s in %s: %v\n%s", d, r.Cluster.Name, err, out)
		}
	}
}
