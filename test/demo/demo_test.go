// Package demo is `make demo`: a whole clusterset on this machine, with a sample pool and
// router exported, that stays up until Ctrl-C. Without DEMO=1 (as in CI) it starts the same
// clusterset, checks that the Global Discovery Service lists the sample, and stops.
package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/clusterset"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func fetch(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// TestDemo is `make demo` (DEMO=1; with DEMO_NODES=1, `make demo NODES=1`, every cluster
// gets a real node, the chart is installed as the manual says, and the sample runs as real
// pods).
func TestDemo(t *testing.T) {
	runDemo(t, os.Getenv("DEMO") == "1", os.Getenv("DEMO_NODES") == "1")
}

// TestDemoOnNodes is `make demo NODES=1` as CI runs it: the clusterset on a real node per
// cluster with the chart installed as the manual says, the sample as Deployments of real
// pods, listed by the Global Discovery Service (a pod, reached through kubectl
// port-forward) with their real addresses.
func TestDemoOnNodes(t *testing.T) {
	if os.Getenv("DEMO") == "1" {
		t.Skip("the interactive demo is TestDemo")
	}
	runDemo(t, false, true)
}

func runDemo(t *testing.T, interactive, nodes bool) {
	dir := t.TempDir()
	if interactive {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".cache", "demo")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// What a demo killed before its cleanup left running (kill -9, a closed terminal).
		if n := harness.KillStale(dir); n > 0 {
			fmt.Printf(">> stopped %d processes an earlier demo left running\n", n)
		}
		// Output piped into a program that ends first (`make demo | tee demo.log`, then
		// Ctrl-C): a write then fails instead of killing the demo before its cleanup.
		signal.Ignore(syscall.SIGPIPE)
	}
	start := time.Now()
	var cs *clusterset.Clusterset
	if nodes {
		fmt.Println(">> starting three local clusters with a real node each (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, CoreDNS; containerd, kubelet, kube-proxy),\n" +
			"   then installing the chart as the manual says (the registry and a controller in use1-a, a controller in usw2-a and euw1-a) and the Global Discovery Service in use1-a")
		cs = clusterset.StartWithChart(t, clusterset.Options{KubeconfigDir: dir})
	} else {
		fmt.Println(">> starting three local clusters (kube-apiserver, etcd, kube-controller-manager), the registry, three controllers and the Global Discovery Service")
		cs = clusterset.Start(t, clusterset.Options{KubeconfigDir: dir})
	}
	cs.DeploySample(t)
	if nodes {
		// The Global Discovery Service runs in a pod: reach it as the manual does.
		cs.GDSURL = "http://127.0.0.1:" + cs.Members[0].PortForward(t, "global-discovery", "service/global-discovery-service", 8080)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pools, routers := fetch(cs.GDSURL+"/pools"), fetch(cs.GDSURL+"/routers")
		// On nodes, every address is a real pod's, from its cluster's pod range.
		realPods := !nodes || strings.Count(routers, `"address":"`+strings.TrimSuffix(cs.Members[0].PodCIDR, "0.0/16")) == 2
		if strings.Count(pools, `"cluster_id"`) == 2 && strings.Count(routers, `"cluster_id"`) == 3 && realPods {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample did not show up:\n/pools %s\n/routers %s", pools, routers)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf(">> up in %s\n\n", time.Since(start).Round(100*time.Millisecond))
	if nodes {
		home := cs.Members[0].Kubeconfig
		fmt.Printf("registry (memory store, in use1-a; the controllers dial %s)\n"+
			"  kubectl --kubeconfig %s -n mcs-system port-forward deployment/mcs-registry 8080:8080 9091:9091\n"+
			"  curl -s localhost:9091/readyz; curl -s localhost:8080/v1/clustersets/prod/clusters\n\n", cs.RegistryURL, home)
		fmt.Println("clusters (kubectl --kubeconfig <file> ...)")
		for _, m := range cs.Members {
			fmt.Printf("  %-7s region %-10s kubeconfig %s\n", m.ID, m.Region, m.Kubeconfig)
			for _, n := range m.Nodes {
				fmt.Printf("          node %s at %s, pods %s, DNS %s, logs in %s\n", n.Name, n.IP, m.PodCIDR, m.DNSIP, n.Dir)
			}
		}
		fmt.Printf("  kubectl --kubeconfig %s -n mcs-system get pods   (the chart's registry and controllers)\n", home)
	} else {
		fmt.Printf("registry (memory store)\n  gRPC   %s\n  REST   http://%s   e.g. curl -s http://%s/v1/clustersets/prod/clusters\n  admin  http://%s   (/metrics /healthz /readyz)\n\n",
			cs.Registry.GRPCAddr, cs.Registry.RESTAddr, cs.Registry.RESTAddr, cs.Registry.AdminAddr)
		fmt.Println("clusters (kubectl --kubeconfig <file> ...)")
		for _, m := range cs.Members {
			fmt.Printf("  %-7s region %-10s kubeconfig %s  controller metrics http://%s/metrics\n", m.ID, m.Region, m.Kubeconfig, m.Controller.MetricsAddr)
		}
	}
	fmt.Printf("\nexported: dynamo/my-dgd-pool-relay (use1-a by label, usw2-a by ServiceExport), global-discovery/global-router (headless; use1-a, usw2-a)\n")
	fmt.Printf("  kubectl --kubeconfig %s -n dynamo get serviceimports,services,endpointslices\n", cs.Members[0].Kubeconfig)
	fmt.Printf("euw1-a has no dynamo namespace yet, so it shows \"No resources found\" there: its controller holds the pool's import\n"+
		"until the namespace exists. Create it and watch the import arrive:\n"+
		"  kubectl --kubeconfig %[1]s create namespace dynamo && kubectl --kubeconfig %[1]s -n dynamo get serviceimports,services,endpointslices\n\n", cs.Members[2].Kubeconfig)
	if nodes {
		fmt.Printf("Global Discovery Service (a pod in use1-a, reading its imports):\n"+
			"  kubectl --kubeconfig %s -n global-discovery port-forward service/global-discovery-service 8080:8080\n"+
			"  curl -s localhost:8080/pools; curl -s localhost:8080/routers\n", cs.Members[0].Kubeconfig)
		fmt.Printf("clusterset.local from a pod of euw1-a, once it has the dynamo namespace (above):\n"+
			"  kubectl --kubeconfig %s -n dynamo run client --rm -it --image=%s --image-pull-policy=Never --restart=Never --command -- nslookup my-dgd-pool-relay.dynamo.svc.clusterset.local\n", cs.Members[2].Kubeconfig, harness.BusyboxImage)
	}
	fmt.Printf("Global Discovery Service (reads use1-a's imports): %s\n", cs.GDSURL)
	fmt.Printf("GET /pools\n%s\nGET /routers\n%s\n\n", fetch(cs.GDSURL+"/pools"), fetch(cs.GDSURL+"/routers"))
	if !interactive {
		return
	}
	fmt.Println(">> running; press Ctrl-C to stop everything")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Println(">> stopping")
}
