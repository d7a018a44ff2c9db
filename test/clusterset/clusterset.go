// Package clusterset starts a whole clusterset on one machine, as the user manual deploys
// it: three local clusters (kube-apiserver, etcd and kube-controller-manager each), the
// registry with the memory store, an mcs-controller per cluster, and the Global Discovery
// Service — all real processes on 127.0.0.1. The end-to-end test and `make demo` use it.
// StartWithChart starts it on clusters with real nodes instead, with the chart installed
// (`make demo NODES=1`).
package clusterset

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// Member is one member cluster.
type Member struct {
	*harness.Cluster
	ID     string
	Region string
	// PodCIDR prefix of the cluster's pods, for example 10.244.1.
	PodPrefix  string
	Controller *harness.Controller
	// ControllerArgs start this cluster's controller again.
	ControllerArgs []string
}

// Clusterset is the running clusterset.
type Clusterset struct {
	Registry *harness.Registry
	// Front is a second address of the registry, listed first in every controller's
	// --registry-url; closing it makes the controllers fail over to the direct address.
	Front   *harness.Forwarder
	Members []*Member
	// GDS is the Global Discovery Service, reading member 0's imports.
	GDS    *harness.Process
	GDSURL string
	// KubeconfigDir holds <cluster-id>.kubeconfig for every member.
	KubeconfigDir string
	// RegistryURL is the registry's gRPC URL that the controllers dial (StartWithChart).
	RegistryURL string
}

// Options configure Start.
type Options struct {
	// KubeconfigDir receives the kubeconfig files; default: a test temp dir.
	KubeconfigDir string
	// ControllerArgs are added to every controller's flags.
	ControllerArgs []string
}

var members = []struct{ id, region, prefix string }{
	{"use1-a", "us-east-1", "10.244.1"},
	{"usw2-a", "us-west-2", "10.244.2"},
	{"euw1-a", "eu-west-1", "10.244.3"},
}

// Start starts the clusterset; everything stops when the test ends.
func Start(tb testing.TB, opts Options) *Clusterset {
	tb.Helper()
	cs := &Clusterset{KubeconfigDir: opts.KubeconfigDir}
	cs.Registry = harness.StartRegistry(tb, "--store=memory")
	cs.Front = harness.Forward(tb, cs.Registry.GRPCAddr)
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.id
	}
	nodeLabels := map[string]map[string]string{}
	for _, m := range members {
		nodeLabels[m.id] = map[string]string{"topology.kubernetes.io/region": m.region, "topology.kubernetes.io/zone": m.region + "a"}
	}
	clusters := harness.StartClusters(tb, harness.ClusterOptions{Names: names, Dir: opts.KubeconfigDir})
	if cs.KubeconfigDir == "" {
		cs.KubeconfigDir = dirOf(clusters[0].Kubeconfig)
	}
	// From here: clusters with nodes may have waited for another test process's nodes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, c := range clusters {
		m := &Member{Cluster: c, ID: members[i].id, Region: members[i].region, PodPrefix: members[i].prefix}
		c.StartControllerManager(tb)
		if _, err := c.CreateNode(ctx, "node-"+m.ID, nodeLabels[m.ID]); err != nil {
			tb.Fatal(err)
		}
		mustNamespace(tb, ctx, c, "global-discovery")
		m.ControllerArgs = append([]string{
			"--registry-url=http://" + cs.Front.Addr, "--registry-url=http://" + cs.Registry.GRPCAddr, "--registry-allow-insecure-http",
			"--clusterset-id=prod", "--cluster-id=" + m.ID, // the region comes from the node label
			"--registry-call-timeout=2s", "--registry-failback-min-interval=2s", "--registry-failback-max-interval=10s",
			"--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s", "--leader-election-retry-period=1s",
		}, opts.ControllerArgs...)
		m.Controller = c.StartController(tb, "mcs-controller/"+m.ID, m.ControllerArgs...)
		cs.Members = append(cs.Members, m)
	}
	port := harness.FreePort(tb)
	cs.GDSURL = "http://" + harness.Addr(port)
	cs.GDS = clusters[0].StartGlobalDiscoveryService(tb, "global-discovery-service",
		"--http-addr="+harness.Addr(port), "--pool-discovery=mcs",
		"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
	cs.GDS.WaitHTTP(tb, cs.GDSURL+"/readyz", 60*time.Second)
	return cs
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "."
}

func mustNamespace(tb testing.TB, ctx context.Context, c *harness.Cluster, name string) {
	tb.Helper()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("%s: create namespace %s: %v", c.Name, name, err)
	}
}

// Workload describes a Service with Pods that kube-controller-manager turns into
// EndpointSlices.
type Workload struct {
	Namespace, Name string
	Port            int32
	TargetPort      int32
	PortName        string
	Headless        bool
	Replicas        int
	// FirstIP is the last octet of the first Pod's address in the member's pod prefix.
	FirstIP int
	// ByLabel exports the Service with the dynamo.nvidia.com/mcs-export label; otherwise a
	// ServiceExport is created (unless NoExport).
	ByLabel  bool
	NoExport bool
}

// Deploy creates the workload's namespace, Service, Pods and export in the member: on a
// member with nodes (StartWithChart) a Deployment of real pods, else Pods with the status a
// kubelet would set.
func (m *Member) Deploy(tb testing.TB, w Workload) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustNamespace(tb, ctx, m.Cluster, w.Namespace)
	if w.PortName == "" {
		w.PortName = "http"
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": w.Name},
			Ports:    []corev1.ServicePort{{Name: w.PortName, Port: w.Port, TargetPort: intstr.FromString(w.PortName)}},
		},
	}
	if w.Headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if w.ByLabel {
		svc.Labels = map[string]string{"dynamo.nvidia.com/mcs-export": "true"}
	}
	if err := m.Client.Create(ctx, svc); err != nil {
		tb.Fatalf("%s: create Service %s/%s: %v", m.ID, w.Namespace, w.Name, err)
	}
	if len(m.Nodes) > 0 {
		m.Apply(tb, harness.DecodeYAML(tb, w.Name, []byte(fmt.Sprintf(httpDeployment, w.Namespace, w.Name, w.Replicas, harness.BusyboxImage, w.PortName, w.TargetPort)))...)
	}
	for i := 0; i < w.Replicas && len(m.Nodes) == 0; i++ {
		if _, err := m.CreatePod(ctx, harness.PodSpec{
			Namespace: w.Namespace, Name: fmt.Sprintf("%s-%d", w.Name, i), Node: "node-" + m.ID,
			IP: fmt.Sprintf("%s.%d", m.PodPrefix, w.FirstIP+i), Ready: true, Labels: map[string]string{"app": w.Name},
			Ports: []corev1.ContainerPort{{Name: w.PortName, ContainerPort: w.TargetPort}},
		}); err != nil {
			tb.Fatal(err)
		}
	}
	if !w.ByLabel && !w.NoExport {
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		if err := m.Client.Create(ctx, se); err != nil {
			tb.Fatalf("%s: create ServiceExport %s/%s: %v", m.ID, w.Namespace, w.Name, err)
		}
	}
}

// DeploySample deploys what the manual's steps export: the PoolRelay Service of DGD
// my-dgd in namespace dynamo — by label in use1-a, by ServiceExport in usw2-a — and the
// headless Global Router Service in global-discovery, in use1-a and usw2-a. euw1-a has no
// dynamo namespace: its controller holds the pool's import until the namespace exists.
func (cs *Clusterset) DeploySample(tb testing.TB) {
	tb.Helper()
	cs.Members[0].Deploy(tb, Workload{Namespace: "dynamo", Name: "my-dgd-pool-relay", Port: 80, TargetPort: 8080, Replicas: 2, FirstIP: 10, ByLabel: true})
	cs.Members[1].Deploy(tb, Workload{Namespace: "dynamo", Name: "my-dgd-pool-relay", Port: 80, TargetPort: 8080, Replicas: 1, FirstIP: 10})
	cs.Members[0].Deploy(tb, Workload{Namespace: "global-discovery", Name: "global-router", Port: 8000, TargetPort: 8000, Headless: true, Replicas: 2, FirstIP: 50})
	cs.Members[1].Deploy(tb, Workload{Namespace: "global-discovery", Name: "global-router", Port: 8000, TargetPort: 8000, Headless: true, Replicas: 1, FirstIP: 50})
}

// httpDeployment is a workload of real pods on a cluster with nodes: busybox's httpd
// answering its pod's name, Ready when it answers.
const httpDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: %[3]d
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: http
        image: %[4]s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "mkdir -p /tmp/www && hostname > /tmp/www/index.html && exec httpd -f -p %[6]d -h /tmp/www"]
        ports:
        - {name: %[5]s, containerPort: %[6]d}
        readinessProbe:
          httpGet: {path: /, port: %[5]s}
          periodSeconds: 1
`
