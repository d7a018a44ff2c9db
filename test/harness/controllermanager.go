package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StartControllerManager runs kube-controller-manager against the cluster with only the
// controllers that turn Services and Pods into EndpointSlices.
func (c *Cluster) StartControllerManager(tb testing.TB) *Process {
	tb.Helper()
	kcm := binary(tb, filepath.Join("bin", "k8s", "kube-controller-manager"), "tools")
	return StartProcess(tb, "kube-controller-manager/"+c.Name, kcm,
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller",
		"--concurrent-service-endpoint-syncs=5",
		"--endpointslice-updates-batch-period=0s",
	)
}

// CreateNode creates a Ready Node: the endpointslice controller ignores Pods whose Node does
// not exist.
func (c *Cluster) CreateNode(ctx context.Context, name string, labels map[string]string) (*corev1.Node, error) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Client.Create(ctx, n); err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, n); err != nil {
		return nil, fmt.Errorf("set node %s ready: %w", name, err)
	}
	return n, nil
}

// PodSpec describes a Pod that CreatePod runs "as if" a kubelet ran it.
type PodSpec struct {
	Namespace, Name, Node, IP string
	Labels                    map[string]string
	Ports                     []corev1.ContainerPort
	Ready                     bool
}

// CreatePod creates a Pod bound to a Node, with the status a kubelet would report:
// phase Running, the pod IP, and the Ready condition.
func (c *Cluster) CreatePod(ctx context.Context, spec PodSpec) (*corev1.Pod, error) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name, Labels: spec.Labels},
		Spec: corev1.PodSpec{
			NodeName:   spec.Node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/none", Ports: spec.Ports}},
		},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	return p, c.SetPodReady(ctx, p, spec.IP, spec.Ready)
}

// SetPodReady sets a Pod's status to Running with ip and the given readiness.
func (c *Cluster) SetPodReady(ctx context.Context, p *corev1.Pod, ip string, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  ip,
		PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: metav1.Now()},
		},
	}
	if err := c.Client.Status().Update(ctx, p); err != nil {
		return fmt.Errorf("set status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
