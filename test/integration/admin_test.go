package integration

import (
	"context"
	"encoding/json"
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
	t.Setenv("AWS_ACCESS_KEY_ID", harness.DynamoDBAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", harness.DynamoDBSecretKey)
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
	if err != nil || !strings.Contains(out, "use1-a   us-east-1  LEASE_STATE_ACTIVE") || !strings.Contains(out, "dynamo     my-dgd-pool-relay  usw2-a   CLUSTER_SET_IP  http/TCP/80  2/2") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	out, err = admin("--region="+d.Region, "--table="+table, "describe", "--clusterset=prod", "-o", "json")
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
	if out, err = admin("--region="+d.Region, "--table="+table, "describe", "--clusterset=prod", "-o", "yaml"); err != nil || !strings.Contains(out, "leaseState: LEASE_STATE_ACTIVE") {
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
	if out, err = admin("--store=memory", "describe", "--clusterset=prod"); err == nil || !strings.Contains(out, "use its REST port") {
		t.Fatalf("--store=memory: %v\n%s", err, out)
	}
}
