package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Spare clusters. Most integration tests start one to three clusters without nodes, and a
// kube-apiserver with its etcd takes seconds of CPU to come up, minutes over a package. A
// package whose TestMain calls KeepSpareClusters gets them started ahead: StartClusters
// hands a test clusters started in the background while the tests before it ran, and at
// once starts the next ones. Each test still gets new clusters of its own, which it stops
// at its end: nothing is shared but the waiting.

// spareClusters is the test process's pool (one package per test binary).
var spareClusters sparePool

// spareKey is what makes clusters interchangeable: their place in StartClusters (which
// gives the service CIDR) and whether they have the CRDs.
type spareKey struct {
	index int
	crds  bool
}

// spareCluster is a cluster being started, or started, for the next test that asks.
type spareCluster struct {
	done chan struct{} // closed when the start ended, c or err set
	c    *Cluster
	err  error
	dir  string
}

type sparePool struct {
	mu    sync.Mutex
	on    bool
	ready map[spareKey][]*spareCluster
}

// KeepSpareClusters makes StartClusters keep one spare of each cluster it starts without
// nodes (by place and CRDs), started in the background. Call it from TestMain before
// m.Run, and the function it returns after: it stops the spares.
func KeepSpareClusters() (stop func()) {
	p := &spareClusters
	p.mu.Lock()
	p.on = true
	p.ready = map[spareKey][]*spareCluster{}
	p.mu.Unlock()
	return p.stop
}

// take returns a started spare for key, or nil when there is none yet. One still starting
// stays a spare: at its lower priority on a busy machine it may take longer than a new
// cluster, which the caller then starts.
func (p *sparePool) take(key spareKey) *spareCluster {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.ready[key]
	if !p.on || len(l) == 0 {
		return nil
	}
	s := l[0]
	select {
	case <-s.done:
	default:
		return nil
	}
	p.ready[key] = l[1:]
	if s.err != nil {
		_ = os.RemoveAll(s.dir)
		return nil
	}
	return s
}

// refill starts a spare for key in the background, unless one is there.
func (p *sparePool) refill(key spareKey, assets string, crds []*apiextensionsv1.CustomResourceDefinition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on || len(p.ready[key]) > 0 {
		return
	}
	s := &spareCluster{done: make(chan struct{})}
	p.ready[key] = append(p.ready[key], s)
	go func() {
		defer close(s.done)
		if s.dir, s.err = os.MkdirTemp("", "harness-spare-"); s.err != nil {
			return
		}
		var ports clusterPorts
		for _, port := range []*int{&ports.apiServer, &ports.etcd, &ports.etcdPeer} {
			if *port, s.err = freePort(); s.err != nil {
				return
			}
		}
		// At a lower priority: a spare takes only what the running tests leave of the CPU.
		// Its owner raises it again (adopt).
		niced := filepath.Join(s.dir, "bin")
		if s.err = os.MkdirAll(niced, 0o755); s.err != nil {
			return
		}
		for _, b := range []string{"etcd", "kube-apiserver"} {
			script := fmt.Sprintf("#!/bin/sh\nexec nice -n %d %s \"$@\"\n", spareNice, filepath.Join(assets, b))
			if s.err = os.WriteFile(filepath.Join(niced, b), []byte(script), 0o755); s.err != nil {
				return
			}
		}
		s.c, s.err = startCluster("spare", serviceCIDR(key.index), niced, s.dir, crds, ports, "")
	}()
}

// stop stops every spare, waiting for those still starting.
func (p *sparePool) stop() {
	p.mu.Lock()
	p.on = false
	all := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, l := range all {
		for _, s := range l {
			<-s.done
			if s.c != nil {
				_ = s.c.Stop()
			}
			_ = os.RemoveAll(s.dir)
		}
	}
}

// adopt makes the spare the test's cluster name, with its kubeconfig in dir; its folder
// goes when the test ends, after the cluster stopped.
func (s *spareCluster) adopt(tb testing.TB, name, dir string) (*Cluster, error) {
	tb.Helper()
	tb.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	b, err := os.ReadFile(s.c.Kubeconfig)
	if err != nil {
		_ = s.c.Stop()
		return nil, fmt.Errorf("spare cluster's kubeconfig: %w", err)
	}
	kubeconfig := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		_ = s.c.Stop()
		return nil, err
	}
	s.c.Name, s.c.Kubeconfig = name, kubeconfig
	// Back to the priority of the test's other processes. Raising a priority needs root
	// (the node tests and CI have it); without, the cluster stays at the spare's.
	for _, pid := range processesNaming(s.dir) {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, 0)
	}
	return s.c, nil
}

// spareNice is the nice value spare clusters start at.
const spareNice = 10

// serviceCIDR is the service range of the cluster at place i of StartClusters.
func serviceCIDR(i int) string { return fmt.Sprintf("10.%d.0.0/16", 96+i) }
