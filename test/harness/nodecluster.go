package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeClusterCerts writes the kube-apiserver's certificates of a cluster with nodes into
// dir: a serving certificate for every name a client uses (127.0.0.1 for the harness, the
// node bridge address for kubelets, the kubernetes Service's ClusterIP and names for pods)
// and the ServiceAccount token key pair. Returns dir.
func nodeClusterCerts(tb testing.TB, dir, serviceCIDR string) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	ca := NewCA(tb, filepath.Base(dir))
	cert, key := ca.IssueServer(tb, "apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(HostIP), net.ParseIP(firstIP(serviceCIDR, 1))})
	for src, dst := range map[string]string{ca.CertFile: "ca.crt", cert: "apiserver.crt", key: "apiserver.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, filepath.Join(dir, "sa-signer.key"), "EC PRIVATE KEY", der)
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, filepath.Join(dir, "sa-signer.crt"), "PUBLIC KEY", pub)
	return dir
}

// nodeKubeconfig returns the admin kubeconfig with the apiserver at its node bridge
// address, which is what a node's processes (in their own network namespace) reach.
func (c *Cluster) nodeKubeconfig(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "https://127.0.0.1:"+strconv.Itoa(c.apiPort), "https://"+HostIP+":"+strconv.Itoa(c.apiPort))
}

// startWithNodes makes each cluster one with a real node (nodes[i] for clusters[i]): the
// controllers of a real cluster, kube-scheduler, the node, and CoreDNS. Each step is
// taken on every cluster before anything is waited on, and the nodes load their images
// side by side: three clusters come up in about the time of one.
func startWithNodes(tb testing.TB, clusters []*Cluster, nodes []*Node) {
	tb.Helper()
	images := NodeImages(tb)
	for i, c := range clusters {
		c.startNodeControllers(tb, nodes[i])
		c.bootNode(tb, nodes[i])
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.loadNode(images)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("harness: %v", err)
		}
	}
	for _, n := range nodes {
		n.runNode(tb)
	}
	for i, c := range clusters {
		c.waitNodeReady(tb, nodes[i])
		c.Nodes = append(c.Nodes, nodes[i])
		c.Apply(tb, DecodeYAML(tb, "coredns", []byte(fmt.Sprintf(corednsManifest, CoreDNSImage, c.DNSIP)))...)
	}
	for i, c := range clusters {
		n := nodes[i]
		Eventually(tb, "CoreDNS of "+c.Name+" available", 2*time.Minute, func() string {
			d := &appsv1.Deployment{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "coredns"}, d); err != nil {
				return err.Error()
			}
			if d.Status.AvailableReplicas < 1 {
				return fmt.Sprintf("available %d of %d%s", d.Status.AvailableReplicas, d.Status.Replicas, n.logTail())
			}
			return ""
		})
	}
}

// startNodeControllers starts what a cluster with nodes runs beside its apiserver:
// kube-controller-manager with the controllers of a real cluster, and kube-scheduler.
func (c *Cluster) startNodeControllers(tb testing.TB, n *Node) {
	tb.Helper()
	c.PodCIDR = clusterPodCIDR(n.index)
	c.DNSIP = firstIP(c.ServiceCIDR, 10)
	kcm := binary(tb, filepath.Join("bin", "k8s", "kube-controller-manager"), "tools")
	StartProcess(tb, "kube-controller-manager/"+c.Name, kcm,
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers="+strings.Join(nodeClusterControllers, ","),
		"--root-ca-file="+filepath.Join(c.certDir, "ca.crt"),
		"--cluster-cidr="+c.PodCIDR,
		"--node-monitor-grace-period=20s",
		"--concurrent-service-endpoint-syncs=5",
		"--endpointslice-updates-batch-period=0s",
	)
	scheduler := binary(tb, filepath.Join("bin", "k8s", "kube-scheduler"), "tools")
	StartProcess(tb, "kube-scheduler/"+c.Name, scheduler,
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	)
}

// nodeClusterControllers are the kube-controller-manager controllers of a cluster with
// nodes: what Deployments, StatefulSets, Services, namespaces, ServiceAccounts and node
// health need.
var nodeClusterControllers = []string{
	"endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller",
	"deployment-controller", "replicaset-controller", "statefulset-controller", "daemonset-controller", "job-controller",
	"garbage-collector-controller", "namespace-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
	"node-lifecycle-controller", "pod-garbage-collector-controller", "ttl-controller", "taint-eviction-controller", "disruption-controller",
}

// corednsManifest is the cluster's DNS: CoreDNS serving cluster.local from the API, as
// kubeadm installs it (its RBAC, ConfigMap, Deployment and the kube-dns Service), and
// clusterset.local from the ServiceImports (the multicluster plugin, docs/dns.md).
const corednsManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [multicluster.x-k8s.io]
  resources: [serviceimports]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        multicluster clusterset.local
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 5
        }
        cache 5
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: %s
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: %s
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
`
