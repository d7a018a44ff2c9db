package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSpareClusters: with spares kept, the second StartClusters gets the spare started
// behind the first: a new cluster (nothing the first test wrote), named as asked, with its
// kubeconfig where the test asked, and working for kubectl.
func TestSpareClusters(t *testing.T) {
	stop := KeepSpareClusters()
	defer stop()
	first := StartClusters(t, ClusterOptions{Names: []string{"first"}})[0]
	if strings.Contains(first.env.ControlPlane.Etcd.DataDir, "harness-spare-") {
		t.Fatalf("the first cluster came from a spare (%s): there was none yet", first.env.ControlPlane.Etcd.DataDir)
	}
	ctx := context.Background()
	if err := first.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "written-by-first"}}); err != nil {
		t.Fatal(err)
	}
	waitSpare(t, spareKey{0, true})
	dir := t.TempDir()
	second := StartClusters(t, ClusterOptions{Names: []string{"second"}, Dir: dir})[0]
	if !strings.Contains(second.env.ControlPlane.Etcd.DataDir, "harness-spare-") {
		t.Fatalf("the second cluster did not come from the spare: etcd in %s", second.env.ControlPlane.Etcd.DataDir)
	}
	if second.Name != "second" || second.Kubeconfig != filepath.Join(dir, "second.kubeconfig") {
		t.Errorf("the spare is %q with kubeconfig %s; want second in %s", second.Name, second.Kubeconfig, dir)
	}
	if second.ServiceCIDR != first.ServiceCIDR {
		t.Errorf("the spare's service CIDR is %s, the first place's %s", second.ServiceCIDR, first.ServiceCIDR)
	}
	err := second.Client.Get(ctx, client.ObjectKey{Name: "written-by-first"}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the spare has the first cluster's namespace: %v", err)
	}
	if out, err := second.Kubectl("get", "crd", "serviceexports.multicluster.x-k8s.io"); err != nil {
		t.Errorf("kubectl with the spare's kubeconfig: %v\n%s", err, out)
	}
	// Started at a lower priority, back at the test's own once adopted (as root).
	pids := processesNaming(filepath.Dir(second.env.ControlPlane.Etcd.DataDir))
	if len(pids) != 2 {
		t.Fatalf("%d processes name the spare's folder, want its etcd and kube-apiserver", len(pids))
	}
	// The next spare, started behind the second, waits at nice 10.
	next := waitSpare(t, spareKey{0, true})
	for _, pid := range processesNaming(next.dir) {
		if n := niceOf(t, pid); n != spareNice {
			t.Errorf("process %d of a waiting spare runs at nice %d, want %d", pid, n, spareNice)
		}
	}
	if os.Geteuid() == 0 {
		for _, pid := range pids {
			if n := niceOf(t, pid); n != 0 {
				t.Errorf("process %d of the adopted spare runs at nice %d, want 0", pid, n)
			}
		}
	}
}

// waitSpare waits until the spare for key has started, and returns it.
func waitSpare(t *testing.T, key spareKey) *spareCluster {
	t.Helper()
	spareClusters.mu.Lock()
	l := spareClusters.ready[key]
	spareClusters.mu.Unlock()
	if len(l) != 1 {
		t.Fatalf("%d spares for %+v, want 1", len(l), key)
	}
	<-l[0].done
	if l[0].err != nil {
		t.Fatal(l[0].err)
	}
	return l[0]
}

// niceOf reads a process's nice value from /proc/<pid>/stat (the 19th field).
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count after it.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return n
}
