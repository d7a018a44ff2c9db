package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubectl runs bin/k8s/kubectl against the cluster and returns its output.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "bin", "k8s", "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig, "--request-timeout=30s"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Helm runs bin/helm against the cluster and fails the test when it fails.
func (c *Cluster) Helm(tb testing.TB, args ...string) {
	tb.Helper()
	out, err := exec.Command(Binary(tb, "helm"), append(args, "--kubeconfig", c.Kubeconfig)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("helm %s in %s: %v\n%s", strings.Join(args[:min(2, len(args))], " "), c.Name, err, out)
	}
}

// PortForward runs `kubectl port-forward -n ns target :remotePort` until the test ends and
// returns the local port it printed.
func (c *Cluster) PortForward(tb testing.TB, ns, target string, remotePort int) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "k8s", "kubectl"), "--kubeconfig", c.Kubeconfig, "port-forward", "-n", ns, target, fmt.Sprintf(":%d", remotePort))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return m[1]
		}
	}
	tb.Fatalf("kubectl port-forward %s printed no local port (%v)", target, lines.Err())
	return ""
}

// HTTPGet returns the trimmed body of a 200 answer.
func HTTPGet(url string) (string, error) {
	code, body, err := Get(url)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("%d %s: %s", code, http.StatusText(code), body)
	}
	return strings.TrimSpace(body), nil
}

// WaitDeploymentAvailable waits up to 2 minutes for a Deployment to have an available
// replica; while it waits, it reports its pods' container states.
func (c *Cluster) WaitDeploymentAvailable(tb testing.TB, ns, name string) {
	tb.Helper()
	Eventually(tb, fmt.Sprintf("deployment %s/%s available in %s", ns, name, c.Name), 2*time.Minute, func() string {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err.Error()
		}
		if d.Status.AvailableReplicas < 1 {
			var pods corev1.PodList
			_ = c.Client.List(context.Background(), &pods, client.InNamespace(ns))
			var states []string
			for _, p := range pods.Items {
				for _, s := range p.Status.ContainerStatuses {
					states = append(states, fmt.Sprintf("%s/%s ready=%v %+v", p.Name, s.Name, s.Ready, s.State))
				}
			}
			return fmt.Sprintf("available %d: %v", d.Status.AvailableReplicas, states)
		}
		return ""
	})
}

// FollowLogs streams the logs of the pods the selector matches now (`kubectl logs -f`)
// until the test ends, and returns a function that gives what they wrote so far: the logs
// of pods an upgrade replaces, which are gone once it is over.
func (c *Cluster) FollowLogs(tb testing.TB, ns, selector string) func() string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "k8s", "kubectl"), "--kubeconfig", c.Kubeconfig,
		"-n", ns, "logs", "-f", "-l", selector, "--prefix", "--tail=-1", "--max-log-requests=10")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("kubectl logs -f in %s: %v", c.Name, err)
	}
	tb.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return out.String
}
