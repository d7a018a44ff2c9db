package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// The package's tests share one clusterset of three clusters with a real node each:
// starting one takes about a minute on 2 cores, and every test here installs the chart
// into clusters as they started, in namespaces it deletes again. A test gets them from
// clusterset(t), which resets them when t ends: every Helm release uninstalled, every
// namespace but the system ones deleted, every CRD deleted, CoreDNS restarted (its
// clusterset.local plugin watched the CRDs that went). TestUpgradeOnNodes alone starts
// clusters of its own (it says why).
var shared sharedClusterset

func TestMain(m *testing.M) {
	code := m.Run()
	shared.scope.Close(code != 0)
	os.Exit(code)
}

type sharedClusterset struct {
	mu       sync.Mutex
	scope    harness.Scope
	clusters []*harness.Cluster
}

// clustersetIDs and clustersetRegions are the shared clusters and their regions (the
// topology.kubernetes.io/region label of each cluster's node; its zone label is the region
// and "a", as clouds label nodes, so kube-proxy follows the locality hints).
var (
	clustersetIDs     = []string{"use1-a", "usw2-a", "euw1-a"}
	clustersetRegions = map[string]string{"use1-a": "us-east-1", "usw2-a": "us-west-2", "euw1-a": "eu-west-1"}
)

// clusterset returns the shared clusters use1-a, usw2-a and euw1-a, without CRDs (the chart
// installs them), started by the first test that asks. They are t's alone until t ends;
// then they are reset for the next test. A reset that fails fails t and drops the clusters:
// the next test starts new ones.
func clusterset(t *testing.T) []*harness.Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("real nodes need root (network namespaces, cgroups, containerd)")
	}
	helm := harness.Binary(t, "helm")
	shared.mu.Lock() // held until t ends: one test at a time has the clusters
	t.Cleanup(func() {
		defer shared.mu.Unlock()
		if shared.clusters == nil { // the start failed, and said why
			return
		}
		took, err := resetClusters(helm, shared.clusters)
		if err != nil {
			t.Errorf("reset of the shared clusters after %s: %v; the next test starts new ones", t.Name(), err)
			shared.drop(true)
			return
		}
		t.Logf("the shared clusters reset after %s: %s", t.Name(), took)
	})
	if shared.clusters == nil {
		start := time.Now()
		shared.scope.Use(t, func(tb testing.TB) {
			shared.clusters = harness.StartClusters(tb, clustersetOptions())
			// A pod whose log TestManualOnNodes reads minutes later; kube-system outlives
			// the resets.
			shared.clusters[0].Apply(tb, harness.DecodeYAML(tb, "log-witness", []byte(fmt.Sprintf(logWitness, harness.BusyboxImage)))...)
		})
		t.Logf("FIGURE the shared clusterset started (three clusters with a Ready node each): %s", time.Since(start).Round(time.Second))
	}
	return shared.clusters
}

// clustersetOptions start the clusters of clustersetIDs, each with one node labelled with
// its region and zone, without CRDs (the chart installs them).
func clustersetOptions() harness.ClusterOptions {
	labels := map[string]map[string]string{}
	for _, id := range clustersetIDs {
		labels[id] = map[string]string{"topology.kubernetes.io/region": clustersetRegions[id], "topology.kubernetes.io/zone": clustersetRegions[id] + "a"}
	}
	return harness.ClusterOptions{Names: clustersetIDs, Nodes: true, NodeLabels: labels, SkipCRDs: true}
}

// logWitness is a pod that logs one line and sleeps.
const logWitness = `apiVersion: v1
kind: Pod
metadata:
  name: log-witness
  namespace: kube-system
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: witness
    image: %s
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo log witness started && exec sleep 86400"]
`

// dropClusterset stops the shared clusters, for a test that needs clusters of its own; a
// later test that asks starts new ones.
func dropClusterset(t *testing.T) {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.clusters == nil {
		return
	}
	start := time.Now()
	shared.drop(t.Failed())
	t.Logf("the shared clusters stopped in %s", time.Since(start).Round(100*time.Millisecond))
}

// drop stops the shared clusters; the caller holds mu.
func (s *sharedClusterset) drop(failed bool) {
	s.scope.Close(failed)
	s.scope = harness.Scope{}
	s.clusters = nil
}

// systemNamespaces are the namespaces a cluster starts with.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// resetClusters returns each cluster to how it started, all at once. It returns how long
// each cluster took, by step.
func resetClusters(helm string, clusters []*harness.Cluster) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs := make([]error, len(clusters))
	took := make([]string, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			steps := []struct {
				name string
				fn   func() error
			}{
				{"delete", func() error { return resetCluster(ctx, helm, c) }},
				{"gone", func() error { return waitReset(ctx, c) }},
				{"coredns", func() error { return restartCoreDNS(ctx, c) }},
			}
			took[i] = c.Name
			for _, step := range steps {
				began := time.Now()
				if err := step.fn(); err != nil {
					errs[i] = fmt.Errorf("%s: %s: %w", c.Name, step.name, err)
					return
				}
				took[i] += fmt.Sprintf(" %s %s", step.name, time.Since(began).Round(100*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	return strings.Join(took, "; "), errors.Join(errs...)
}

// resetCluster uninstalls every Helm release and starts deleting every namespace but the
// system ones (their pods at once) and every CRD.
func resetCluster(ctx context.Context, helmBin string, c *harness.Cluster) error {
	helm := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, helmBin, append(args, "--kubeconfig", c.Kubeconfig)...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	out, err := helm("list", "--all-namespaces", "--all", "--output", "json")
	if err != nil {
		return err
	}
	var releases []struct{ Name, Namespace string }
	if err := json.Unmarshal([]byte(out), &releases); err != nil {
		return fmt.Errorf("helm list: %w: %s", err, out)
	}
	for _, r := range releases {
		if _, err := helm("uninstall", r.Name, "--namespace", r.Namespace, "--no-hooks"); err != nil { // what a hook would delete goes with its namespace or CRD
			return err
		}
	}
	var nss corev1.NamespaceList
	if err := c.Client.List(ctx, &nss); err != nil {
		return err
	}
	for _, ns := range nss.Items {
		if slices.Contains(systemNamespaces, ns.Name) {
			continue
		}
		if err := c.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0)); err != nil {
			return fmt.Errorf("delete the pods of %s: %w", ns.Name, err)
		}
		if err := c.Client.Delete(ctx, &ns); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
		}
	}
	if out, err := c.Kubectl("delete", "crd", "--all", "--wait=false"); err != nil {
		return fmt.Errorf("kubectl delete crd --all: %w: %s", err, out)
	}
	return nil
}

// waitReset waits until the namespaces and CRDs are gone, then restarts CoreDNS.
func waitReset(ctx context.Context, c *harness.Cluster) error {
	for {
		var nss corev1.NamespaceList
		left := ""
		if err := c.Client.List(ctx, &nss); err != nil {
			return err
		}
		for _, ns := range nss.Items {
			if slices.Contains(systemNamespaces, ns.Name) {
				continue
			}
			left += " namespace/" + ns.Name
			// Pods their controllers made again before the namespace controller deleted
			// those: at once too, not after their grace period.
			if err := c.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0)); err != nil {
				return fmt.Errorf("delete the pods of %s: %w", ns.Name, err)
			}
		}
		crds := &unstructured.UnstructuredList{}
		crds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
		if err := c.Client.List(ctx, crds); err != nil {
			return err
		}
		for _, crd := range crds.Items {
			left += " crd/" + crd.GetName()
			if err := dropFinalizers(ctx, c, crd); err != nil {
				return err
			}
		}
		if left == "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still there:%s", left)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// dropFinalizers removes the finalizers of the custom resources of crd, which is being
// deleted: the controller that would remove them went with its release (uninstalled
// without its hooks), and a resource that keeps one holds its namespace and CRD forever.
func dropFinalizers(ctx context.Context, c *harness.Cluster, crd unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if served, _ := version["served"].(bool); !served {
			continue
		}
		name, _ := version["name"].(string)
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: name, Kind: kind + "List"})
		if err := c.Client.List(ctx, list); err != nil {
			return nil // the CRD went meanwhile, or is not served yet: the next round sees
		}
		for _, item := range list.Items {
			if len(item.GetFinalizers()) == 0 {
				continue
			}
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			if err := c.Client.Patch(ctx, &item, patch); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("drop the finalizers of %s %s/%s: %w", kind, item.GetNamespace(), item.GetName(), err)
			}
		}
		return nil
	}
	return nil
}

// restartCoreDNS replaces the CoreDNS pod and waits until the new one is Ready: its
// clusterset.local plugin watched the CRDs that went.
func restartCoreDNS(ctx context.Context, c *harness.Cluster) error {
	dns := client.MatchingLabels{"k8s-app": "kube-dns"}
	var before corev1.PodList
	if err := c.Client.List(ctx, &before, client.InNamespace("kube-system"), dns); err != nil {
		return err
	}
	if err := c.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("kube-system"), dns, client.GracePeriodSeconds(0)); err != nil {
		return fmt.Errorf("delete the CoreDNS pod: %w", err)
	}
	for {
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, client.InNamespace("kube-system"), dns); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if slices.ContainsFunc(before.Items, func(old corev1.Pod) bool { return old.UID == p.UID }) {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no new CoreDNS pod Ready: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
