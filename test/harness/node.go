package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node is a real node of a local cluster: containerd, kubelet and kube-proxy in the node's
// own network namespace, with its own cgroup, containerd root and socket, and logs.
type Node struct {
	// Name is the Node's name: <cluster>-node.
	Name string
	// IP is the node's address on the node bridge (its InternalIP).
	IP string
	// PodCIDR is the range the node's pods get addresses from.
	PodCIDR string
	// Dir holds the node's configuration, state, sockets and logs
	// (containerd.log, kubelet.log, kube-proxy.log).
	Dir string
	// Netns is the node's network namespace (/run/netns/<Netns>).
	Netns string
	// Labels are set by kubelet when it registers the Node.
	Labels map[string]string

	index int
	procs []*Process
}

// nodeFor returns the node layout of node index k in cluster name.
func nodeFor(k int, cluster string) *Node {
	return &Node{
		Name:    cluster + "-node",
		IP:      nodeSubnetPrefix + strconv.Itoa(10+k),
		PodCIDR: fmt.Sprintf("10.%d.0.0/24", 200+k),
		Dir:     filepath.Join(NodesDir, strconv.Itoa(k)),
		Netns:   netnsPrefix + strconv.Itoa(k),
		index:   k,
	}
}

// clusterPodCIDR is the pod range of the cluster of node k; one node per cluster takes its
// first /24.
func clusterPodCIDR(k int) string { return fmt.Sprintf("10.%d.0.0/16", 200+k) }

// cgroup is the node's cgroup (kubelet's cgroupRoot); containerd, kubelet, kube-proxy and
// every container live under it, so the node stops as a whole.
func (n *Node) cgroup() string { return "/" + n.Netns }

// podLogsDir is the node's own pod-log folder (kubelet's podLogsDir): each kubelet cleans
// the folders of pods it does not run, so nodes sharing the host's /var/log/pods deleted
// each other's logs. Removed with the node (and with NodesDir after a killed run).
func (n *Node) podLogsDir() string { return filepath.Join(n.Dir, "pod-logs") }

// bootNode prepares the node of cluster c and starts its containerd; loadNode then loads
// the images, and runNode starts kubelet and kube-proxy. Nothing here waits for the node
// to be Ready (waitNodeReady does): StartClusters brings every node through each step
// before it waits on any, so on 2 cores the nodes' start-ups overlap instead of adding up.
func (c *Cluster) bootNode(tb testing.TB, n *Node) {
	tb.Helper()
	tb.Cleanup(n.stop)
	for _, d := range []string{"", "cni", "kubelet", "containerd-root", "containerd-state", "ipam", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			tb.Fatalf("harness: node %s: %v", n.Name, err)
		}
	}
	if err := n.setupNetwork(); err != nil {
		tb.Fatalf("harness: node %s network: %v", n.Name, err)
	}
	if err := makeCgroup(n.cgroup() + "/node"); err != nil {
		tb.Fatalf("harness: node %s: %v", n.Name, err)
	}
	files := map[string]string{
		"containerd.toml":     n.containerdConfig(),
		"cni/10-mcs.conflist": n.cniConfig(),
		"kubelet.yaml":        n.kubeletConfig(c),
		"kube-proxy.yaml":     n.kubeProxyConfig(c),
		"resolv.conf":         "",
		"kubeconfig":          c.nodeKubeconfig(tb),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o600); err != nil {
			tb.Fatalf("harness: node %s: %v", n.Name, err)
		}
	}
	n.start(tb, "containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))
}

// loadNode waits for the node's containerd and loads images into it. It only returns
// an error, so that StartClusters can load every node at once from other goroutines.
func (n *Node) loadNode(images []NodeImage) error {
	sock := filepath.Join(n.Dir, "containerd.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := run("ctr", "--address", sock, "version")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd of %s does not serve within 30 s: %w", n.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, img := range images {
		if err := n.loadImage(img); err != nil {
			return err
		}
	}
	return nil
}

// runNode starts the node's kubelet and kube-proxy.
func (n *Node) runNode(tb testing.TB) {
	tb.Helper()
	kubelet := binary(tb, filepath.Join("bin", "k8s", "kubelet"), "tools")
	n.start(tb, "kubelet", kubelet,
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(n.Dir, "kubeconfig"),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP,
		"--node-labels="+n.labelsFlag(),
		"--v=1",
	)
	proxy := binary(tb, filepath.Join("bin", "k8s", "kube-proxy"), "tools")
	n.start(tb, "kube-proxy", proxy, "--config="+filepath.Join(n.Dir, "kube-proxy.yaml"), "--v=1")
}

// waitNodeReady waits until the node of cluster c is Ready.
func (c *Cluster) waitNodeReady(tb testing.TB, n *Node) {
	tb.Helper()
	Eventually(tb, "node "+n.Name+" Ready", 2*time.Minute, func() string {
		node := &corev1.Node{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: n.Name}, node); err != nil {
			return err.Error() + n.logTail()
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return ""
				}
				return cond.Reason + ": " + cond.Message + n.logTail()
			}
		}
		return "no Ready condition yet" + n.logTail()
	})
}

// loadImage loads img into the node's containerd, where kubelet finds it (pods use
// imagePullPolicy Never: no image registry is reachable).
func (n *Node) loadImage(img NodeImage) error {
	repo := img.Ref[:strings.LastIndex(img.Ref, ":")]
	if err := run("ctr", "--address", filepath.Join(n.Dir, "containerd.sock"), "-n", "k8s.io", "images", "import", "--base-name", repo, img.Tar); err != nil {
		return fmt.Errorf("node %s: import %s: %w", n.Name, img.Ref, err)
	}
	return nil
}

// ImportImage loads img into every node of the cluster, beside the images every node gets.
func (c *Cluster) ImportImage(tb testing.TB, img NodeImage) {
	tb.Helper()
	for _, n := range c.Nodes {
		if err := n.loadImage(img); err != nil {
			tb.Fatalf("harness: %v", err)
		}
	}
}

// labelsFlag is kubelet's --node-labels: the node's Labels, sorted.
func (n *Node) labelsFlag() string {
	var kv []string
	for k, v := range n.Labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// start runs one of the node's processes in its network namespace and cgroup, with its
// output in <Dir>/<name>.log as well.
func (n *Node) start(tb testing.TB, name, path string, args ...string) {
	tb.Helper()
	logf, err := os.Create(filepath.Join(n.Dir, name+".log"))
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	p := startProcess(tb, n.Name+"/"+name, logf, "nsenter", append([]string{"--net=/run/netns/" + n.Netns, "--", path}, args...)...)
	if err := joinCgroup(n.cgroup()+"/node", p.Pid()); err != nil {
		tb.Fatalf("harness: node %s: %v", n.Name, err)
	}
	n.procs = append(n.procs, p)
}

// logTail returns the last lines of the node's kubelet log, for a node that does not come up.
func (n *Node) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "kubelet.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "\n  kubelet: " + strings.Join(lines, "\n  kubelet: ")
}

// stop stops the node: its processes, every container (by the node's cgroup), its
// mounts, its network namespace and route. The logs are kept (and printed when a test
// failed); the folder goes with the last node.
func (n *Node) stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(5 * time.Second)
	}
	for _, h := range cgroupHierarchies {
		removeCgroup(filepath.Join("/sys/fs/cgroup", h, n.cgroup()))
	}
	unmountUnder(n.Dir + "/")
	_ = os.RemoveAll(n.podLogsDir())
	_ = run("ip", "route", "del", clusterPodCIDR(n.index))
	_ = run("ip", "netns", "del", n.Netns)
}

// setupNetwork makes the node's namespace, plugs it into the bridge, and routes the
// cluster's pod range to it from the host (and so from every other node).
func (n *Node) setupNetwork() error {
	host, peer := "mcsh"+strconv.Itoa(n.index), "mcsn"+strconv.Itoa(n.index)
	for _, args := range [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", host, "master", NodeBridge, "up"},
		{"ip", "link", "set", peer, "netns", n.Netns},
		{"ip", "-n", n.Netns, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", n.Netns, "addr", "add", n.IP + "/" + strconv.Itoa(nodeSubnetBits), "dev", "eth0"},
		{"ip", "-n", n.Netns, "link", "set", "eth0", "up"},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
		{"ip", "-n", n.Netns, "route", "add", "default", "via", HostIP},
		{"ip", "route", "add", clusterPodCIDR(n.index), "via", n.IP},
		// Forwarding for the pods; bridged pod traffic through iptables, so a pod reaches a
		// Service backed by a pod of its own node (kube-proxy's rules).
		{"ip", "netns", "exec", n.Netns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"},
	} {
		if err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  # Containers may not lower their OOM score below the node's: this machine's processes
  # lack CAP_SYS_RESOURCE, and runc fails to start a sandbox at -998.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
`, filepath.Join(n.Dir, "containerd-root"), filepath.Join(n.Dir, "containerd-state"),
		filepath.Join(n.Dir, "containerd.sock"), filepath.Join(n.Dir, "containerd.sock.ttrpc"),
		filepath.Join(n.Dir, "opt"), PauseImage, filepath.Join(n.Dir, "cni"))
}

func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "mcs",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, filepath.Join(n.Dir, "ipam"), n.PodCIDR)
}

func (n *Node) kubeletConfig(c *Cluster) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %[2]s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[3]s
clusterDNS: [%[4]s]
clusterDomain: cluster.local
resolvConf: %[5]s
enforceNodeAllocatable: []
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
podCIDR: %[6]s
maxPods: 60
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
podLogsDir: %[7]s
`, n.IP, n.cgroup(), filepath.Join(n.Dir, "containerd.sock"), c.DNSIP, filepath.Join(n.Dir, "resolv.conf"), n.PodCIDR, n.podLogsDir())
}

func (n *Node) kubeProxyConfig(c *Cluster) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: %[4]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, filepath.Join(n.Dir, "kubeconfig"), n.Name, clusterPodCIDR(n.index), n.IP)
}

// firstIP returns the first host address of cidr (the kubernetes Service's, or the
// gateway's).
func firstIP(cidr string, offset int) string {
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		return ""
	}
	ip := ipn.IP.To4()
	out := make(net.IP, 4)
	copy(out, ip)
	out[3] += byte(offset)
	return out.String()
}
