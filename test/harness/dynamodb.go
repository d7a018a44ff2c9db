package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDB is a DynamoDB-compatible server for a test.
type DynamoDB struct {
	// Endpoint is the server's URL, for --endpoint-url or AWS_ENDPOINT_URL_DYNAMODB.
	Endpoint string
	// Region is the region clients use.
	Region string
}

// Static credentials for the local server: it checks that requests are signed, not by whom.
const (
	DynamoDBAccessKey = "local"
	DynamoDBSecretKey = "local"
)

// StartDynamoDB returns a DynamoDB-compatible server: DYNAMODB_ENDPOINT when set, else a
// dynoxide (npm @dynoxide/linux-x64, installed by `make tools`) started for this test on a
// free loopback port, in memory, stopped when the test ends.
func StartDynamoDB(tb testing.TB) *DynamoDB {
	tb.Helper()
	if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" {
		return &DynamoDB{Endpoint: ep, Region: "us-east-1"}
	}
	return StartDynamoDBOn(tb, "127.0.0.1")
}

// StartDynamoDBOn is StartDynamoDB listening on host: HostIP for pods of clusters with
// nodes, which reach the host there.
func StartDynamoDBOn(tb testing.TB, host string) *DynamoDB {
	tb.Helper()
	bin := binary(tb, filepath.Join("node_modules", "@dynoxide", "linux-x64", "dynoxide"), "tools")
	port := FreePort(tb)
	p := StartProcess(tb, "dynoxide", bin, "serve", "--host", host, "--port", strconv.Itoa(port))
	d := &DynamoDB{Endpoint: "http://" + net.JoinHostPort(host, strconv.Itoa(port)), Region: "us-east-1"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := d.Client()
	for {
		if exited, err := p.Exited(); exited {
			tb.Fatalf("harness: dynoxide exited: %v\n%s", err, p.Output())
		}
		if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err == nil {
			return d
		} else if ctx.Err() != nil {
			tb.Fatalf("harness: dynoxide did not answer on %s: %v", d.Endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Config returns an AWS configuration for the server.
func (d *DynamoDB) Config() aws.Config {
	return aws.Config{
		Region:       d.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(DynamoDBAccessKey, DynamoDBSecretKey, ""),
		BaseEndpoint: aws.String(d.Endpoint),
	}
}

// Client returns a DynamoDB client for the server.
func (d *DynamoDB) Client() *dynamodb.Client { return dynamodb.NewFromConfig(d.Config()) }

// TableName returns a table name unique to the test.
func TableName(tb testing.TB) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano(), os.Getpid())
}
