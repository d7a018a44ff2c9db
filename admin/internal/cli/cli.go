// Package cli is mcs-admin: operator commands that work on the registry's DynamoDB table
// directly, with the registry role's (or an administrator's) AWS credentials, or on a
// running registry through its REST port (any store; with mTLS, an admin identity).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/registryrest"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
)

// DefaultTable is the table name the manual uses.
const DefaultTable = "global-discovery-mcs"

type globals struct {
	store       string
	region      string
	table       string
	endpointURL string

	registryURL      string
	registryCAFile   string
	registryCertFile string
	registryKeyFile  string
}

// registryData is what describe and delete-cluster need: the DynamoDB store itself, or a
// running registry.
type registryData interface {
	ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error)
	ListExports(ctx context.Context, clusterset string) ([]store.Export, error)
	DeleteCluster(ctx context.Context, k store.ClusterKey) (int, error)
	ListUnreadable(ctx context.Context, clusterset string) ([]store.Unreadable, error)
	DeleteExport(ctx context.Context, k store.ClusterKey, svc store.ServiceKey) (bool, error)
}

// check refuses TLS flags without a registry, and a store mcs-admin cannot reach.
func (g *globals) check(cmd *cobra.Command) error {
	if g.registryURL == "" {
		for _, f := range []string{"registry-tls-ca-file", "registry-tls-cert-file", "registry-tls-key-file", "registry-ca-file", "registry-cert-file", "registry-key-file"} {
			if cmd.Flags().Changed(f) {
				return command.Usagef("--%s: only used with --registry-rest-url", f)
			}
		}
		if g.store != "dynamodb" {
			return command.Usagef("--store %q: mcs-admin works on the dynamodb table directly; a memory store lives inside one mcs-registry process: reach it with --registry-rest-url", g.store)
		}
	}
	// --registry-rest-url excludes the table's flags: cobra's flag groups (New).
	return nil
}

// required marks flags of cmd as required (cobra checks them, their deprecated aliases
// included).
func required(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(err) // a flag this package did not define
		}
	}
}

// data returns the store or the registry the flags name, and how to name it in messages.
func (g *globals) data(ctx context.Context) (registryData, string, error) {
	if g.registryURL != "" {
		c, err := registryrest.New(registryrest.Options{URL: g.registryURL, CAFile: g.registryCAFile, CertFile: g.registryCertFile, KeyFile: g.registryKeyFile})
		if err != nil {
			// New dials nothing: what it refuses is the flags' values.
			return nil, "", command.AsUsage(err)
		}
		return c, "registry " + g.registryURL, nil
	}
	c, _, err := g.client(ctx)
	if err != nil {
		return nil, "", err
	}
	return dynamostore.New(dynamostore.Options{Client: c, Table: g.table}), "table " + g.table, nil
}

// New returns the root command.
func New() *cobra.Command {
	g := &globals{}
	root := command.NewRoot("mcs-admin", "Operator commands for the global-discovery-mcs registry store",
		`mcs-admin works on the registry's DynamoDB table directly, with the AWS credentials of
the default chain (environment, shared config, IRSA, EKS Pod Identity).

With --registry-rest-url it works through a running registry's REST port instead, whatever
its store (the memory store lives inside one mcs-registry process): describe and
delete-cluster. A registry with --client-ca-file needs --registry-tls-cert-file and
--registry-tls-key-file of an admin identity (spiffe://<trust-domain>/admin) for
delete-cluster and other clustersets.`)
	root.Example = `  mcs-admin --region=us-east-1 describe --clusterset-id=prod
  mcs-admin --registry-rest-url=http://localhost:8080 describe --clusterset-id=prod
  mcs-admin --registry-rest-url=https://mcs-registry.example.internal:8080 --registry-tls-ca-file=ca.crt \
    --registry-tls-cert-file=admin.crt --registry-tls-key-file=admin.key delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes`
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return g.check(cmd) }
	root.PersistentFlags().StringVar(&g.store, "store", "dynamodb", "The registry store whose table to work on: dynamodb (for any store, use --registry-rest-url).")
	root.PersistentFlags().StringVar(&g.region, "region", "", "AWS region of the table; empty: AWS_REGION.")
	root.PersistentFlags().StringVar(&g.table, "table", DefaultTable, "DynamoDB table of the registry.")
	root.PersistentFlags().StringVar(&g.endpointURL, "endpoint-url", "", "DynamoDB endpoint, for a DynamoDB-compatible server; empty: AWS_ENDPOINT_URL_DYNAMODB, else the region's endpoint.")
	// The controller's --registry-rest-url is the gRPC port: this one has its own name, the
	// earlier one stays as a deprecated alias.
	alias(root.PersistentFlags(), &g.registryURL, "registry-rest-url", "registry-url", "Work through this running registry's REST port (http(s)://host:8080) instead of the table: describe and delete-cluster, any store.")
	// The names mcs-controller gives the same files; the earlier names stay as deprecated aliases.
	alias(root.PersistentFlags(), &g.registryCAFile, "registry-tls-ca-file", "registry-ca-file", "With an https --registry-rest-url: PEM CA bundle that verifies the registry; empty: the system roots.")
	alias(root.PersistentFlags(), &g.registryCertFile, "registry-tls-cert-file", "registry-cert-file", "With --registry-rest-url: PEM client certificate, for a registry with --client-ca-file.")
	alias(root.PersistentFlags(), &g.registryKeyFile, "registry-tls-key-file", "registry-key-file", "With --registry-rest-url: PEM key of --registry-tls-cert-file.")
	// A table or a running registry, not both.
	for _, f := range []string{"store", "table", "region", "endpoint-url"} {
		root.MarkFlagsMutuallyExclusive("registry-rest-url", f)
	}
	root.AddCommand(createTableCmd(g), describeCmd(g), deleteClusterCmd(g), deleteExportCmd(g), diagnoseCmd(g))
	return root
}

// Main runs the command line and returns the exit code: 0, 1 for a runtime error, 2 for a
// usage error (a flag, its value, an argument or a command).
func Main(args []string, stdout, stderr io.Writer) int {
	return command.Execute(context.Background(), New(), args, stdout, stderr)
}

// alias defines a string flag and an earlier name for it, deprecated: using it works and
// says on standard error which name to use.
func alias(fs *pflag.FlagSet, p *string, name, old, usage string) {
	fs.StringVar(p, name, "", usage)
	command.Alias(fs, name, old)
}

func (g *globals) client(ctx context.Context) (*dynamodb.Client, string, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if g.region != "" {
		opts = append(opts, awsconfig.WithRegion(g.region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", errors.New("--region: required when AWS_REGION is not set")
	}
	ep := g.endpointURL
	if ep == "" {
		ep = os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	}
	if ep != "" {
		cfg.BaseEndpoint = aws.String(ep)
	}
	return dynamodb.NewFromConfig(cfg), cfg.Region, nil
}
