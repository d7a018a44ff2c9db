// Package cli is mcs-admin: operator commands that work on the registry's DynamoDB table
// directly, with the registry role's (or an administrator's) AWS credentials, or on a
// running registry through its REST port (any store; with mTLS, an admin identity).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/registryrest"
	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/version"
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
	// aliases maps each deprecated flag name to the name that replaced it.
	aliases map[string]string
}

// registryData is what describe and delete-cluster need: the DynamoDB store itself, or a
// running registry.
type registryData interface {
	ListClusters(ctx context.Context, clusterset string) ([]store.Cluster, error)
	ListExports(ctx context.Context, clusterset string) ([]store.Export, error)
	DeleteCluster(ctx context.Context, k store.ClusterKey) (int, error)
}

// check refuses flag combinations that name two different places to work on.
func (g *globals) check(cmd *cobra.Command) error {
	if g.registryURL == "" {
		for _, f := range []string{"registry-tls-ca-file", "registry-tls-cert-file", "registry-tls-key-file", "registry-ca-file", "registry-cert-file", "registry-key-file"} {
			if cmd.Flags().Changed(f) {
				return usageErrorf("--%s: only used with --registry-url", f)
			}
		}
		if g.store != "dynamodb" {
			return usageErrorf("--store %q: mcs-admin works on the dynamodb table directly; a memory store lives inside one mcs-registry process: reach it with --registry-url", g.store)
		}
		return nil
	}
	for _, f := range []string{"store", "table", "region", "endpoint-url"} {
		if cmd.Flags().Changed(f) {
			return usageErrorf("--%s: names a DynamoDB table, but --registry-url works through a running registry; give one or the other", f)
		}
	}
	return nil
}

// data returns the store or the registry the flags name, and how to name it in messages.
func (g *globals) data(ctx context.Context) (registryData, string, error) {
	if g.registryURL != "" {
		c, err := registryrest.New(registryrest.Options{URL: g.registryURL, CAFile: g.registryCAFile, CertFile: g.registryCertFile, KeyFile: g.registryKeyFile})
		if err != nil {
			// New dials nothing: what it refuses is the flags' values.
			return nil, "", usageError{err}
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
	root := &cobra.Command{
		Use:   "mcs-admin",
		Short: "Operator commands for the global-discovery-mcs registry store",
		Long: `mcs-admin works on the registry's DynamoDB table directly, with the AWS credentials of
the default chain (environment, shared config, IRSA, EKS Pod Identity).

With --registry-url it works through a running registry's REST port instead, whatever its
store (the memory store lives inside one mcs-registry process): describe and delete-cluster.
A registry with --client-ca-file needs --registry-tls-cert-file/--registry-tls-key-file of an admin
identity (spiffe://<trust-domain>/admin) for delete-cluster and other clustersets.`,
		Example: `  mcs-admin --region=us-east-1 describe --clusterset-id=prod
  mcs-admin --registry-url=http://localhost:8080 describe --clusterset-id=prod
  mcs-admin --registry-url=https://mcs-registry.example.internal:8080 --registry-tls-ca-file=ca.crt \
    --registry-tls-cert-file=admin.crt --registry-tls-key-file=admin.key delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.warnDeprecated(cmd)
			return g.check(cmd)
		},
	}
	root.PersistentFlags().StringVar(&g.store, "store", "dynamodb", "The registry store whose table to work on: dynamodb (for any store, use --registry-url).")
	root.PersistentFlags().StringVar(&g.region, "region", "", "AWS region of the table; empty: AWS_REGION.")
	root.PersistentFlags().StringVar(&g.table, "table", DefaultTable, "DynamoDB table of the registry.")
	root.PersistentFlags().StringVar(&g.endpointURL, "endpoint-url", "", "DynamoDB endpoint, for a DynamoDB-compatible server; empty: AWS_ENDPOINT_URL_DYNAMODB, else the region's endpoint.")
	root.PersistentFlags().StringVar(&g.registryURL, "registry-url", "", "Work through this running registry's REST port (http(s)://host:8080) instead of the table: describe and delete-cluster, any store.")
	// The names mcs-controller gives the same files; the earlier names stay as deprecated aliases.
	g.alias(root.PersistentFlags(), &g.registryCAFile, "registry-tls-ca-file", "registry-ca-file", "With an https --registry-url: PEM CA bundle that verifies the registry; empty: the system roots.")
	g.alias(root.PersistentFlags(), &g.registryCertFile, "registry-tls-cert-file", "registry-cert-file", "With --registry-url: PEM client certificate, for a registry with --client-ca-file.")
	g.alias(root.PersistentFlags(), &g.registryKeyFile, "registry-tls-key-file", "registry-key-file", "With --registry-url: PEM key of --registry-tls-cert-file.")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(createTableCmd(g), describeCmd(g), deleteClusterCmd(g))
	return root
}

// Main runs the command line and returns the exit code: 0, 1 for a runtime error, 2 for a
// usage error (a flag, its value, an argument or a command).
func Main(args []string, stdout, stderr io.Writer) int {
	root := New()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(stderr, "mcs-admin: %v\n", err)
		var u usageError
		if errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command") {
			fmt.Fprintln(stderr, "Run 'mcs-admin --help' for usage.")
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// alias defines a string flag and an earlier name for it, deprecated: using it works and
// says on standard error which name to use (pflag's own notice goes to standard output,
// into -o json).
func (g *globals) alias(fs *pflag.FlagSet, p *string, name, old, usage string) {
	fs.StringVar(p, name, "", usage)
	fs.StringVar(p, old, "", usage)
	_ = fs.MarkHidden(old)
	if g.aliases == nil {
		g.aliases = map[string]string{}
	}
	g.aliases[old] = name
}

// warnDeprecated tells, on standard error, which deprecated names the command line used.
func (g *globals) warnDeprecated(cmd *cobra.Command) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if name, ok := g.aliases[f.Name]; ok {
			fmt.Fprintf(cmd.ErrOrStderr(), "Flag --%s is deprecated, use --%s\n", f.Name, name)
		}
	})
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

func createTableCmd(g *globals) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "create-table",
		Short: "Create the registry's table with its stream, and wait until it is ACTIVE",
		Example: `  mcs-admin create-table --table=global-discovery-mcs --region=us-east-1
  # then, for several regions, add a Global Table replica per region (docs/storage.md)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.registryURL != "" {
				return usageErrorf("--registry-url: create-table works on DynamoDB directly, not through a registry; give --table and --region")
			}
			ctx := cmd.Context()
			c, region, err := g.client(ctx)
			if err != nil {
				return err
			}
			created, err := dynamostore.CreateTable(ctx, c, g.table)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !created {
				fmt.Fprintf(out, "table %s already exists in %s; nothing to do\n", g.table, region)
			} else {
				fmt.Fprintf(out, "creating table %s in %s\n", g.table, region)
			}
			deadline := time.Now().Add(wait)
			for {
				d, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &g.table})
				if err != nil {
					return fmt.Errorf("describe table %s: %w", g.table, err)
				}
				st := d.Table.TableStatus
				if st == types.TableStatusActive {
					fmt.Fprintf(out, "table %s is ACTIVE (stream %s)\n", g.table, aws.ToString(d.Table.LatestStreamArn))
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("table %s is still %s after %s", g.table, st, wait)
				}
				fmt.Fprintf(out, "  status %s, waiting...\n", st)
				time.Sleep(2 * time.Second)
			}
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "How long to wait for the table to become ACTIVE.")
	return cmd
}

// Description is what describe prints as JSON or YAML.
type Description struct {
	Clusterset string               `json:"clusterset"`
	Time       time.Time            `json:"time"`
	Clusters   []ClusterDescription `json:"clusters"`
	Exports    []ExportDescription  `json:"exports"`
}

// ClusterDescription is one cluster and its lease.
type ClusterDescription struct {
	ClusterID    string    `json:"clusterId"`
	Region       string    `json:"region"`
	LeaseState   string    `json:"leaseState"`
	LeaseSeconds float64   `json:"leaseSeconds"`
	RenewTime    time.Time `json:"renewTime"`
	ExpireTime   time.Time `json:"expireTime"`
	RegisterTime time.Time `json:"registerTime"`
}

// ExportDescription is one export and its endpoint set.
type ExportDescription struct {
	Namespace      string    `json:"namespace"`
	Name           string    `json:"name"`
	ClusterID      string    `json:"clusterId"`
	Type           string    `json:"type"`
	Ports          []string  `json:"ports"`
	Endpoints      int       `json:"endpoints"`
	ReadyEndpoints int       `json:"readyEndpoints"`
	Addresses      []string  `json:"addresses"`
	CreateTime     time.Time `json:"createTime"`
	UpdateTime     time.Time `json:"updateTime"`
}

// describe reads a clusterset from the store or a registry.
func describe(ctx context.Context, st registryData, clusterset string, now time.Time) (Description, error) {
	d := Description{Clusterset: clusterset, Time: now, Clusters: []ClusterDescription{}, Exports: []ExportDescription{}}
	clusters, err := st.ListClusters(ctx, clusterset)
	if err != nil {
		return d, err
	}
	for _, c := range clusters {
		state := "LEASE_STATE_EXPIRED"
		if c.Active(now) {
			state = "LEASE_STATE_ACTIVE"
		}
		d.Clusters = append(d.Clusters, ClusterDescription{
			ClusterID: c.ClusterID, Region: c.Region, LeaseState: state, LeaseSeconds: c.LeaseDuration.Seconds(),
			RenewTime: c.RenewTime, ExpireTime: c.ExpireTime(), RegisterTime: c.RegisterTime,
		})
	}
	exports, err := st.ListExports(ctx, clusterset)
	if err != nil {
		return d, err
	}
	for _, e := range exports {
		ed := ExportDescription{
			Namespace: e.Service.Namespace, Name: e.Service.Name, ClusterID: e.ClusterID,
			Type: strings.TrimPrefix(e.Spec.GetType().String(), "SERVICE_TYPE_"), Ports: []string{}, Addresses: []string{},
			CreateTime: e.CreateTime, UpdateTime: e.UpdateTime,
		}
		for _, p := range e.Spec.GetPorts() {
			proto := p.GetProtocol()
			if proto == "" {
				proto = "TCP"
			}
			ed.Ports = append(ed.Ports, fmt.Sprintf("%s/%s/%d", p.GetName(), proto, p.GetPort()))
		}
		for _, g := range e.EndpointGroups {
			for _, ep := range g.GetEndpoints() {
				ed.Endpoints++
				if ep.GetConditions().Ready == nil || ep.GetConditions().GetReady() {
					ed.ReadyEndpoints++
				}
				ed.Addresses = append(ed.Addresses, ep.GetAddresses()...)
			}
		}
		sort.Strings(ed.Addresses)
		d.Exports = append(d.Exports, ed)
	}
	return d, nil
}

func describeCmd(g *globals) *cobra.Command {
	var clusterset, output string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "List a clusterset's clusters with their lease states, the exports and their endpoint sets",
		Example: `  mcs-admin --store=dynamodb --region=us-east-1 describe --clusterset-id=prod
  mcs-admin --region=us-east-1 describe --clusterset-id=prod -o yaml
  mcs-admin --registry-url=http://localhost:8080 describe --clusterset-id=prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clusterset == "" {
				return usageErrorf("--clusterset-id: required")
			}
			if output != "table" && output != "json" && output != "yaml" {
				return usageErrorf("-o %q: must be table, json or yaml", output)
			}
			ctx := cmd.Context()
			data, _, err := g.data(ctx)
			if err != nil {
				return err
			}
			d, err := describe(ctx, data, clusterset, time.Now())
			if err != nil {
				return err
			}
			return printDescription(cmd.OutOrStdout(), d, output)
		},
	}
	g.alias(cmd.Flags(), &clusterset, "clusterset-id", "clusterset", "The clusterset to describe (required).")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func printDescription(w io.Writer, d Description, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTERS OF %s\n", d.Clusterset)
	fmt.Fprintln(tw, "CLUSTER\tREGION\tLEASE\tEXPIRES\tREGISTERED")
	for _, c := range d.Clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.ClusterID, dash(c.Region), c.LeaseState, c.ExpireTime.Format(time.RFC3339), c.RegisterTime.Format(time.RFC3339))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXPORTS")
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tCLUSTER\tTYPE\tPORTS\tREADY/ENDPOINTS\tCREATED")
	for _, e := range d.Exports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.Namespace, e.Name, e.ClusterID, e.Type, strings.Join(e.Ports, ","), e.ReadyEndpoints, e.Endpoints, e.CreateTime.Format(time.RFC3339))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deleteClusterCmd(g *globals) *cobra.Command {
	var clusterset, cluster string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete-cluster",
		Short: "Remove a cluster that will not return, with all its exports and endpoints",
		Example: `  mcs-admin --store=dynamodb --region=us-east-1 delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes
  mcs-admin --registry-url=http://localhost:8080 delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clusterset == "" || cluster == "" {
				return usageErrorf("--clusterset-id and --cluster-id: both required")
			}
			if !yes {
				return usageErrorf("this removes cluster %s and all its exports from clusterset %s; add --yes to do it", cluster, clusterset)
			}
			ctx := cmd.Context()
			data, where, err := g.data(ctx)
			if err != nil {
				return err
			}
			n, err := data.DeleteCluster(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: cluster})
			if errors.Is(err, store.ErrClusterNotFound) {
				return fmt.Errorf("cluster %s is not registered in clusterset %s (%s)", cluster, clusterset, where)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted cluster %s of clusterset %s and its %d exports\n", cluster, clusterset, n)
			return nil
		},
	}
	g.alias(cmd.Flags(), &clusterset, "clusterset-id", "clusterset", "The clusterset (required).")
	g.alias(cmd.Flags(), &cluster, "cluster-id", "cluster", "The cluster id to delete (required).")
	cmd.Flags().BoolVar(&yes, "yes", false, "Confirm the deletion.")
	return cmd
}
