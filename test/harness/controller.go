package harness

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Controller is a running mcs-controller.
type Controller struct {
	*Process
	MetricsAddr, ProbeAddr string
}

// StartController starts bin/mcs-controller against the cluster with extra flags (the
// registry URL and identity flags among them), in namespace mcs-system for leader election,
// and waits until its health endpoint answers. It runs as the chart's ServiceAccount
// mcs-controller, under the RBAC the chart renders for the same flags; a permission refused
// to it fails the test.
func (c *Cluster) StartController(tb testing.TB, name string, args ...string) *Controller {
	tb.Helper()
	ctl := &Controller{MetricsAddr: Addr(FreePort(tb)), ProbeAddr: Addr(FreePort(tb))}
	all := append([]string{
		"--kubeconfig=" + c.ControllerKubeconfig(tb, slices.Contains(args, "--create-namespaces"), slices.Contains(args, "--metrics-secure")),
		"--metrics-addr=" + ctl.MetricsAddr,
		"--health-probe-addr=" + ctl.ProbeAddr,
		"--leader-election-namespace=mcs-system",
	}, args...)
	ctl.Process = StartProcess(tb, name, Binary(tb, "mcs-controller"), all...)
	FailOnForbidden(tb, ctl.Process, c)
	ctl.WaitHTTP(tb, "http://"+ctl.ProbeAddr+"/healthz", 60*time.Second)
	return ctl
}

// ControllerKubeconfig installs the chart's controller RBAC (with controller.createNamespaces
// and controller.metrics.secure as given) into the cluster and returns a kubeconfig of its
// ServiceAccount.
func (c *Cluster) ControllerKubeconfig(tb testing.TB, createNamespaces, secureMetrics bool) string {
	tb.Helper()
	objs := RenderChart(tb, "registry.enabled=false", "controller.enabled=true",
		"controller.registryUrls={https://mcs-registry.example:9090}", fmt.Sprintf("controller.createNamespaces=%t", createNamespaces),
		fmt.Sprintf("controller.metrics.secure=%t", secureMetrics))
	c.Apply(tb, RBACObjects(objs, false)...)
	return c.ServiceAccountKubeconfig(tb, ReleaseNamespace, "mcs-controller")
}
