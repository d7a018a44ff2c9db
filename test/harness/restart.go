package harness

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestartAPIServer kills the cluster's kube-apiserver and starts it again with the same
// flags, certificates and etcd: clients see the API server go away and come back, as in a
// control-plane upgrade. It returns when the API server is ready again.
func (c *Cluster) RestartAPIServer(tb testing.TB) {
	tb.Helper()
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	port := "--secure-port=" + u.Port()
	pid, argv := findProcess(tb, "kube-apiserver", port)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		tb.Fatalf("harness: kill kube-apiserver: %v", err)
	}
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The new process stops with the cluster (Stop), after the test's processes that use
	// it, as the first one would have: their cleanups may still ask it (FailOnForbidden).
	// envtest's own Stop then finds its process gone.
	startProcess(withClusterStop{tb, c}, "kube-apiserver/"+c.Name, nil, argv[0], argv[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Back means ready for what tests do next, not only answering: /readyz says ok, and a
	// Service can be given a cluster IP (a restarted apiserver refuses that with "range is
	// full" until its ServiceCIDR allocator has synced).
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "harness-restart-probe"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	var last error
	for {
		var nsl corev1.NamespaceList
		if last = c.Client.List(ctx, &nsl); last == nil {
			last = c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		}
		if last == nil {
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("harness: kube-apiserver of %s did not come back ready: %v", c.Name, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// findProcess returns the pid and argv of the process named name whose arguments include arg.
func findProcess(tb testing.TB, name, arg string) (int, []string) {
	tb.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if filepath.Base(argv[0]) != name {
			continue
		}
		for _, a := range argv[1:] {
			if a == arg {
				return pid, argv
			}
		}
	}
	tb.Fatalf("harness: no %s process with %s", name, arg)
	return 0, nil
}

// withClusterStop is tb with its cleanups run when the cluster stops instead.
type withClusterStop struct {
	testing.TB
	c *Cluster
}

func (w withClusterStop) Cleanup(f func()) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.stops = append(w.c.stops, f)
}
