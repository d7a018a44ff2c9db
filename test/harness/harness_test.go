package harness_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestThreeClusters starts three clusters at once; in the first, kube-controller-manager
// turns a Service and its Pods into a real EndpointSlice; in every one, a ServiceExport
// written as v1alpha1 is read back as v1beta1.
func TestThreeClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	clusters := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a", "usw2-a", "euw1-a"}})
	t.Logf("three clusters started in %s", time.Since(start).Round(time.Millisecond))

	for _, c := range clusters {
		// The control plane serves below the ephemeral port range, so a restart can bind
		// its port again (harness.FreePort).
		lo, hi := harness.PortRange()
		if u, err := url.Parse(c.Config.Host); err != nil || mustAtoi(t, u.Port()) < lo || mustAtoi(t, u.Port()) >= hi {
			t.Fatalf("%s: API server at %q, want a port in [%d, %d)", c.Name, c.Config.Host, lo, hi)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dynamo"}}
		if err := c.Client.Create(ctx, ns); err != nil {
			t.Fatalf("%s: create namespace: %v", c.Name, err)
		}
		se := &unstructured.Unstructured{}
		se.SetAPIVersion("multicluster.x-k8s.io/v1alpha1")
		se.SetKind("ServiceExport")
		se.SetNamespace("dynamo")
		se.SetName("my-dgd-pool-relay")
		if err := c.Client.Create(ctx, se); err != nil {
			t.Fatalf("%s: create v1alpha1 ServiceExport: %v", c.Name, err)
		}
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("multicluster.x-k8s.io/v1beta1")
		got.SetKind("ServiceExport")
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, got); err != nil {
			t.Fatalf("%s: read the ServiceExport as v1beta1: %v", c.Name, err)
		}
		if got.GetAPIVersion() != "multicluster.x-k8s.io/v1beta1" || got.GetUID() != se.GetUID() {
			t.Fatalf("%s: read back %s uid %s, want v1beta1 of uid %s", c.Name, got.GetAPIVersion(), got.GetUID(), se.GetUID())
		}
		cp := &unstructured.Unstructured{}
		cp.SetAPIVersion("about.k8s.io/v1alpha1")
		cp.SetKind("ClusterProperty")
		cp.SetName("cluster.clusterset.k8s.io")
		_ = unstructured.SetNestedField(cp.Object, c.Name, "spec", "value")
		if err := c.Client.Create(ctx, cp); err != nil {
			t.Fatalf("%s: create ClusterProperty: %v", c.Name, err)
		}
	}

	c := clusters[0]
	c.StartControllerManager(t)
	if _, err := c.CreateNode(ctx, "node-a", map[string]string{"topology.kubernetes.io/zone": "us-east-1a"}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "my-dgd-pool-relay"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "relay"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatalf("create service: %v", err)
	}
	for i, ip := range []string{"10.244.0.10", "10.244.0.11"} {
		if _, err := c.CreatePod(ctx, harness.PodSpec{
			Namespace: "dynamo", Name: fmt.Sprintf("relay-%d", i), Node: "node-a", IP: ip, Ready: i == 0,
			Labels: map[string]string{"app": "relay"},
			Ports:  []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var slices discoveryv1.EndpointSliceList
		if err := c.Client.List(ctx, &slices, client.InNamespace("dynamo"), client.MatchingLabels{discoveryv1.LabelServiceName: "my-dgd-pool-relay"}); err != nil {
			t.Fatalf("list slices: %v", err)
		}
		ready := map[string]bool{}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				ready[e.Addresses[0]] = e.Conditions.Ready != nil && *e.Conditions.Ready
			}
			if len(ready) == 2 && ready["10.244.0.10"] && !ready["10.244.0.11"] && len(s.Ports) == 1 && *s.Ports[0].Port == 8080 {
				t.Logf("EndpointSlice %s from kube-controller-manager: %v", s.Name, ready)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no EndpointSlice with both pods (one ready) appeared; last seen %v", ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDynamoDBConditionalWrite round-trips a conditional write against the local server.
func TestDynamoDBConditionalWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	c := d.Client()
	table := harness.TableName(t)
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	put := func(v string) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(table),
			Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "v": &types.AttributeValueMemberS{Value: v}},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	var ccf *types.ConditionalCheckFailedException
	if err := put("second"); !errors.As(err, &ccf) {
		t.Fatalf("second conditional put error = %v, want ConditionalCheckFailedException", err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v := out.Item["v"].(*types.AttributeValueMemberS).Value; v != "first" {
		t.Fatalf("stored value = %q, want the first write kept", v)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFreePort: ports are below the ephemeral range, bindable, and never handed out twice.
func TestFreePort(t *testing.T) {
	lo, hi := harness.PortRange()
	if hi <= lo {
		t.Skipf("the ephemeral port range starts at %d: FreePort falls back to ephemeral ports", hi)
	}
	seen := map[int]bool{}
	for range 50 {
		p := harness.FreePort(t)
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("FreePort = %d (seen before: %v), want a new port in [%d, %d)", p, seen[p], lo, hi)
		}
		seen[p] = true
	}
}

func TestKillStale(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	// A process naming a path under dir (as etcd names its data dir), and one naming another.
	// Each waits in the shell's builtin read, forking nothing: a forked child would carry
	// the same command line until it execs, and be counted too.
	stale := exec.Command("sh", "-c", "read _", filepath.Join(dir, "etcd"))
	keep := exec.Command("sh", "-c", "read _", filepath.Join(other, "etcd"))
	for _, c := range []*exec.Cmd{stale, keep} {
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close() })
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = keep.Process.Kill(); _ = keep.Wait() }()
	done := make(chan error, 1)
	go func() { done <- stale.Wait() }()
	if n := harness.KillStale(dir); n != 1 {
		t.Fatalf("KillStale killed %d processes, want 1", n)
	}
	select {
	case err := <-done:
		t.Logf("the stale process ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the stale process is still running")
	}
	if err := keep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process of another folder was killed: %v", err)
	}
}

// TestReplicatorStallAndDelay: the replicator copies a write to the other region after its
// delay; paused, it copies nothing until it resumes, then everything it read; a longer delay
// holds each copy back that long.
func TestReplicatorStallAndDelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := harness.StartDynamoDB(t), harness.StartDynamoDB(t)
	table := harness.TableName(t)
	for _, d := range []*harness.DynamoDB{a, b} {
		if _, err := dynamostore.CreateTable(ctx, d.Client(), table); err != nil {
			t.Fatal(err)
		}
	}
	r := harness.Replicate(t, a, b, table, 100*time.Millisecond)
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "CS#test"}, "SK": &types.AttributeValueMemberS{Value: sk}}
	}
	put := func(sk string) {
		t.Helper()
		if _, err := a.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key(sk)}); err != nil {
			t.Fatal(err)
		}
	}
	inB := func(sk string) bool {
		t.Helper()
		out, err := b.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(sk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	waitInB := func(sk string) time.Duration {
		t.Helper()
		start := time.Now()
		harness.Eventually(t, sk+" replicated", 20*time.Second, func() string {
			if !inB(sk) {
				return "not in region B"
			}
			return ""
		})
		return time.Since(start)
	}

	put("USAGE#one")
	waitInB("USAGE#one")

	r.Pause()
	put("USAGE#two")
	time.Sleep(time.Second)
	if inB("USAGE#two") {
		t.Fatal("a write was replicated while replication was paused")
	}
	r.Resume()
	waitInB("USAGE#two")

	r.SetDelay(2 * time.Second)
	put("USAGE#three")
	if took := waitInB("USAGE#three"); took < 1500*time.Millisecond {
		t.Errorf("a write with a 2 s delay was replicated after %s", took)
	}
}
