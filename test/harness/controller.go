package harness

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Controller is a running mcs-controller.
type Controller struct {
	*Process
	MetricsAddr, ProbeAddr string
}

// StartController starts bin/mcs-controller against the cluster with extra flags (the
// registry URL and identity flags among them), in namespace mcs-system for leader election,
// and waits until its health endpoint answers.
func (c *Cluster) StartController(tb testing.TB, name string, args ...string) *Controller {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcs-system"}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("harness: create namespace mcs-system: %v", err)
	}
	ctl := &Controller{MetricsAddr: Addr(FreePort(tb)), ProbeAddr: Addr(FreePort(tb))}
	all := append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--metrics-bind-address=" + ctl.MetricsAddr,
		"--health-probe-bind-address=" + ctl.ProbeAddr,
		"--leader-election-namespace=mcs-system",
	}, args...)
	ctl.Process = StartProcess(tb, name, Binary(tb, "mcs-controller"), all...)
	ctl.WaitHTTP(tb, "http://"+ctl.ProbeAddr+"/healthz", 60*time.Second)
	return ctl
}
