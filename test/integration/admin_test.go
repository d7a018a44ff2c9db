package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// execAdmin runs the real mcs-admin against d.
func execAdmin(tb testing.TB, d *harness.DynamoDB, args ...string) (string, error) {
	tb.Helper()
	cmd := exec.Command(harness.Binary(tb, "mcs-admin"), append([]string{"--endpoint-url=" + d.Endpoint}, args...)...)
	cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID="+harness.DynamoDBAccessKey, "AWS_SECRET_ACCESS_KEY="+harness.DynamoDBSecretKey)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAdmin runs the real mcs-admin against dynoxide: create-table (twice), describe in each
// format after a real registry wrote to the table, and delete-cluster with and without --yes.
func TestAdmin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := harness.StartDynamoDB(t)
	table := harness.TableName(t)
	admin := func(args ...string) (string, error) { return execAdmin(t, d, args...) }
	out, err := admin("create-table", "--table="+table, "--region="+d.Region)
	if err != nil || !strings.Contains(out, "creating table "+table) || !strings.Contains(out, "is ACTIVE") {
		t.Fatalf("create-table: %v\n%s", err, out)
	}
	if out, err = admin("create-table", "--table="+table, "--region="+d.Region); err != nil || !strings.Contains(out, "already exists") {
		t.Fatalf("create-table again: %v\n%s", err, out)
	}

	reg := dynamoRegistry(t, d, table)
	c := dial(t, reg.GRPCAddr)
	for _, id := range []string{"use1-a", "usw2-a"} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, Region: "us-east-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: id, Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1", "10.1.0.2")}); err != nil {
			t.Fatal(err)
		}
	}

	out, err = admin("--store=dynamodb", "--region="+d.Region, "--table="+table, "describe", "--clusterset=prod")
	if err != nil || !strings.Contains(out, "use1-a   us-east-1  LEASE_STATE_ACTIVE") || !strings.Contains(out, "dynamo     my-dgd-pool-relay  usw2-a   CLUSTER_SET_IP  http/TCP/80  (default)  2/2") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	// The manual's --clusterset is the deprecated name of --clusterset-id: it works and says so.
	if !strings.Contains(out, "Flag --clusterset is deprecated, use --clusterset-id") {
		t.Fatalf("describe --clusterset: no deprecation notice\n%s", out)
	}
	out, err = admin("--region="+d.Region, "--table="+table, "describe", "--clusterset-id=prod", "-o", "json")
	var desc struct {
		Clusters []struct{ ClusterID, LeaseState string }
		Exports  []struct {
			ClusterID string
			Addresses []string
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &desc) != nil || len(desc.Clusters) != 2 || len(desc.Exports) != 2 || len(desc.Exports[0].Addresses) != 2 {
		t.Fatalf("describe -o json: %v\n%s", err, out)
	}
	if out, err = admin("--region="+d.Region, "--table="+table, "describe", "--clusterset-id=prod", "-o", "yaml"); err != nil || !strings.Contains(out, "leaseState: LEASE_STATE_ACTIVE") {
		t.Fatalf("describe -o yaml: %v\n%s", err, out)
	}

	if out, err = admin("--region="+d.Region, "--table="+table, "delete-cluster", "--clusterset=prod", "--cluster=use1-a"); err == nil || !strings.Contains(out, "add --yes") {
		t.Fatalf("delete-cluster without --yes: %v\n%s", err, out)
	}
	if out, err = admin("--store=dynamodb", "--region="+d.Region, "--table="+table, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes"); err != nil || !strings.Contains(out, "and its 1 exports") {
		t.Fatalf("delete-cluster: %v\n%s", err, out)
	}
	// The registry sees it: use1-a and its endpoints are gone from the import.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports")
		if !strings.Contains(body, "use1-a") && strings.Contains(body, "usw2-a") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry still imports the deleted cluster: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err = admin("--region="+d.Region, "--table="+table, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes"); err == nil || !strings.Contains(out, "is not registered") {
		t.Fatalf("delete of a missing cluster: %v\n%s", err, out)
	}
	if out, err = admin("--store=memory", "describe", "--clusterset=prod"); err == nil || !strings.Contains(out, "reach it with --registry-rest-url") {
		t.Fatalf("--store=memory: %v\n%s", err, out)
	}
}

// execAdminRegistry runs the real mcs-admin against a running registry's REST port.
func execAdminRegistry(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	out, err := exec.Command(harness.Binary(tb, "mcs-admin"), args...).CombinedOutput()
	return string(out), err
}

// TestAdminThroughRegistry: with --registry-rest-url, mcs-admin describes and deletes through a
// running registry — the memory store included — and, against a registry that requires
// client certificates, only an admin identity may delete a cluster.
func TestAdminThroughRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := func(c registryv1.RegistryServiceClient, id string) {
		t.Helper()
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: id, Region: "us-east-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: id, Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, Spec: relaySpec(80), EndpointGroups: endpoints("10.1.0.1", "10.1.0.2")}); err != nil {
			t.Fatal(err)
		}
	}

	// The memory store, plaintext.
	reg := harness.StartRegistry(t, "--store=memory")
	c := dial(t, reg.GRPCAddr)
	seed(c, "use1-a")
	seed(c, "usw2-a")
	url := "--registry-rest-url=http://" + reg.RESTAddr
	out, err := execAdminRegistry(t, url, "describe", "--clusterset=prod")
	if err != nil || !strings.Contains(out, "use1-a   us-east-1  LEASE_STATE_ACTIVE") || !strings.Contains(out, "dynamo     my-dgd-pool-relay  usw2-a   CLUSTER_SET_IP  http/TCP/80  (default)  2/2") {
		t.Fatalf("describe through the registry: %v\n%s", err, out)
	}
	var desc struct {
		Clusters []struct{ ClusterID, LeaseState string }
		Exports  []struct {
			ClusterID string
			Addresses []string
		}
	}
	out, err = execAdminRegistry(t, url, "describe", "--clusterset-id=prod", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &desc) != nil || len(desc.Clusters) != 2 || len(desc.Exports) != 2 || fmt.Sprint(desc.Exports[1].Addresses) != "[10.1.0.1 10.1.0.2]" {
		t.Fatalf("describe -o json through the registry: %v\n%s", err, out)
	}
	// The tier each cluster's importer uses: its own endpoints, and for a cluster of
	// another region without endpoints of its own, every cluster.
	if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "euw1-a", Region: "eu-west-1"}); err != nil {
		t.Fatal(err)
	}
	var tiers struct {
		Locality []struct {
			Name, Policy  string
			PolicyDefault bool
			Tiers         []struct {
				Tier     string
				Clusters []string
			}
		}
	}
	out, err = execAdminRegistry(t, url, "describe", "--clusterset-id=prod", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &tiers) != nil || fmt.Sprint(tiers.Locality) != "[{my-dgd-pool-relay cluster,region true [{cluster [use1-a usw2-a]} {any [euw1-a]}]}]" {
		t.Fatalf("describe's locality through the registry: %v %+v\n%s", err, tiers.Locality, out)
	}
	// A clusterset the registry does not know describes as empty, like an empty table.
	if out, err = execAdminRegistry(t, url, "describe", "--clusterset-id=staging", "-o", "json"); err != nil || !strings.Contains(out, `"clusters": []`) {
		t.Fatalf("describe of an unknown clusterset: %v\n%s", err, out)
	}
	if out, err = execAdminRegistry(t, url, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes"); err != nil || !strings.Contains(out, "deleted cluster use1-a of clusterset prod and its 1 exports") {
		t.Fatalf("delete-cluster through the registry: %v\n%s", err, out)
	}
	if _, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/imports"); strings.Contains(body, "use1-a") || !strings.Contains(body, "usw2-a") {
		t.Fatalf("the registry still imports the deleted cluster: %s", body)
	}
	if out, err = execAdminRegistry(t, url, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes"); err == nil || !strings.Contains(out, "cluster use1-a is not registered in clusterset prod (registry http://") {
		t.Fatalf("delete of a missing cluster through the registry: %v\n%s", err, out)
	}

	// Client certificates required: a cluster identity may not delete; an admin may.
	serverCA, clientCA := harness.NewCA(t, "server"), harness.NewCA(t, "clients")
	certFile, keyFile := serverCA.IssueServer(t, "registry", []string{"localhost"}, nil)
	treg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile,
		"--client-ca-file="+clientCA.CertFile, "--trust-domain=example.org")
	_, grpcPort, _ := net.SplitHostPort(treg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(treg.RESTAddr)
	day := time.Now().Add(24 * time.Hour)
	aCert, aKey := clientCA.IssueClient(t, "use1-a", []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, day)
	adminCert, adminKey := clientCA.IssueClient(t, "admin", []string{"spiffe://example.org/admin"}, day)
	seed(dialTLS(t, "localhost:"+grpcPort, serverCA.ClientConfig(t, "localhost", aCert, aKey)), "use1-a")
	turl := []string{"--registry-url=https://localhost:" + restPort, "--registry-ca-file=" + serverCA.CertFile}
	asCluster := append(turl, "--registry-cert-file="+aCert, "--registry-key-file="+aKey)
	asAdmin := append(turl, "--registry-cert-file="+adminCert, "--registry-key-file="+adminKey)
	if out, err = execAdminRegistry(t, append(turl, "describe", "--clusterset=prod")...); err == nil || !strings.Contains(out, "a registry with --client-ca-file needs --registry-tls-cert-file and --registry-tls-key-file") {
		t.Fatalf("describe without a client certificate: %v\n%s", err, out)
	}
	if out, err = execAdminRegistry(t, append(asCluster, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes")...); err == nil || !strings.Contains(out, "registry answered HTTP 403") || !strings.Contains(out, "needs an admin identity") {
		t.Fatalf("delete-cluster as a cluster: %v\n%s", err, out)
	}
	if out, err = execAdminRegistry(t, append(asAdmin, "describe", "--clusterset=prod")...); err != nil || !strings.Contains(out, "use1-a   us-east-1  LEASE_STATE_ACTIVE") {
		t.Fatalf("describe as admin: %v\n%s", err, out)
	}
	if out, err = execAdminRegistry(t, append(asAdmin, "delete-cluster", "--clusterset=prod", "--cluster=use1-a", "--yes")...); err != nil || !strings.Contains(out, "and its 1 exports") {
		t.Fatalf("delete-cluster as admin: %v\n%s", err, out)
	}
}
