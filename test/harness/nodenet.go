package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The node network, as kind lays it out with containers: one host bridge that every
// node's network namespace is plugged into, the host at its first address. Each node is
// a network namespace with its own interfaces, routes and iptables, so several clusters'
// nodes on one machine share no chains, ports or state.
const (
	// NodeBridge is the host's bridge between the nodes.
	NodeBridge = "mcsnodes0"
	// HostIP is the host's address on the node bridge: every kube-apiserver of a cluster
	// with nodes listens there (and advertises it as the kubernetes Service's endpoint).
	HostIP = "172.30.0.1"
	// nodeSubnet holds the nodes' addresses: node k (from 0) is 172.30.0.(10+k).
	nodeSubnetPrefix = "172.30.0."
	nodeSubnetBits   = 24
	// NodesDir holds each node's configuration, sockets, state and logs (short paths:
	// unix socket names are limited to 108 bytes).
	NodesDir = "/run/mcs-nodes"
	// netnsPrefix names the nodes' network namespaces and cgroups.
	netnsPrefix = "mcs-"
	lockFile    = "/run/mcs-nodes.lock"
)

// cgroupHierarchies are the cgroup v1 hierarchies a node's cgroup is made in.
var cgroupHierarchies = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// nodeNetwork is the machine's node network, held by one test process at a time.
type nodeNetwork struct {
	mu    sync.Mutex
	lock  *os.File
	next  int // the next node index
	users int
}

var nodeNet nodeNetwork

// acquire takes the machine-wide lock (another test process with nodes waits), and on the
// first use sweeps what a killed earlier run left, then makes the bridge. It returns the
// index of a new node; the node's share is released when the test ends.
func (n *nodeNetwork) acquire(tb testing.TB) int {
	tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	tb.Cleanup(n.release)
	if n.lock == nil {
		if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
			tb.Fatalf("harness: %v", err)
		}
		f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			tb.Fatalf("harness: node lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			tb.Fatalf("harness: node lock: %v", err)
		}
		n.lock = f
		sweepNodes()
		if err := setupBridge(); err != nil {
			tb.Fatalf("harness: node bridge: %v", err)
		}
	}
	n.users++
	k := n.next
	n.next++
	return k
}

// release is called when a node is gone; the last one removes the bridge and frees the lock.
func (n *nodeNetwork) release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.users--
	if n.users > 0 || n.lock == nil {
		return
	}
	sweepNodes()
	_ = run("ip", "link", "del", NodeBridge)
	_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
	_ = n.lock.Close()
	n.lock = nil
}

func setupBridge() error {
	if err := run("ip", "link", "add", NodeBridge, "type", "bridge"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"ip", "addr", "add", HostIP + "/" + strconv.Itoa(nodeSubnetBits), "dev", NodeBridge},
		{"ip", "link", "set", NodeBridge, "up"},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// sweepNodes removes every node of this machine: processes in the nodes' cgroups (the
// containers and their shims outlive a killed containerd), mounts under NodesDir, the
// nodes' network namespaces (with their interfaces; the pods' are under NodesDir) and
// the bridge.
func sweepNodes() {
	for _, h := range cgroupHierarchies {
		entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", h))
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), netnsPrefix) {
				removeCgroup(filepath.Join("/sys/fs/cgroup", h, e.Name()))
			}
		}
	}
	unmountUnder(NodesDir)
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), netnsPrefix) {
			_ = run("ip", "netns", "del", e.Name())
			_ = os.Remove(filepath.Join("/run/netns", e.Name()))
		}
	}
	_ = run("ip", "link", "del", NodeBridge)
	_ = os.RemoveAll(NodesDir)
	// Routes to pod CIDRs went with the bridge's interfaces.
}

// removeCgroup kills every process in the cgroup tree at dir, then removes its folders.
func removeCgroup(dir string) {
	for attempt := 0; attempt < 50; attempt++ {
		var dirs []string
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		alive := false
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					alive = true
				}
			}
		}
		if alive {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountUnder detaches every mount point whose path starts with prefix, deepest first.
func unmountUnder(prefix string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], prefix) {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// makeCgroup makes /<name> in every hierarchy (cpuset's with its parent's CPUs and memory
// nodes, which a new cpuset does not inherit).
func makeCgroup(name string) error {
	for _, h := range cgroupHierarchies {
		base := filepath.Join("/sys/fs/cgroup", h)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		dir := base
		for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if h == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
					}
				}
			}
		}
	}
	return nil
}

// joinCgroup moves pid into /<name> of every hierarchy.
func joinCgroup(name string, pid int) error {
	for _, h := range cgroupHierarchies {
		procs := filepath.Join("/sys/fs/cgroup", h, name, "cgroup.procs")
		if _, err := os.Stat(procs); err != nil {
			continue
		}
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join %s: %w", procs, err)
		}
	}
	return nil
}

// run runs a command and returns its output in the error.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
