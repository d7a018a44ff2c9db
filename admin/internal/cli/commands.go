package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
)

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
				return command.Usagef("--registry-rest-url: create-table works on DynamoDB directly, not through a registry; give --table and --region")
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
			// The SDK's waiter: describe at once, then again with backoff until ACTIVE.
			waiter := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
				o.MinDelay, o.MaxDelay = time.Second, 10*time.Second
			})
			d, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: &g.table}, wait)
			if err != nil {
				return fmt.Errorf("table %s is not ACTIVE after %s (--wait): %w", g.table, wait, err)
			}
			fmt.Fprintf(out, "table %s is ACTIVE (stream %s)\n", g.table, aws.ToString(d.Table.LatestStreamArn))
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "How long to wait for the table to become ACTIVE.")
	return cmd
}

func deleteClusterCmd(g *globals) *cobra.Command {
	var clusterset, cluster string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete-cluster",
		Short: "Remove a cluster that will not return, with all its exports and endpoints",
		Example: `  mcs-admin --store=dynamodb --region=us-east-1 delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes
  mcs-admin --registry-rest-url=http://localhost:8080 delete-cluster --clusterset-id=prod --cluster-id=use1-a --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return command.Usagef("this removes cluster %s and all its exports from clusterset %s; add --yes to do it", cluster, clusterset)
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
	alias(cmd.Flags(), &clusterset, "clusterset-id", "clusterset", "The clusterset (required).")
	alias(cmd.Flags(), &cluster, "cluster-id", "cluster", "The cluster id to delete (required).")
	required(cmd, "clusterset-id", "cluster-id")
	cmd.Flags().BoolVar(&yes, "yes", false, "Confirm the deletion.")
	return cmd
}

func deleteExportCmd(g *globals) *cobra.Command {
	var clusterset, cluster string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete-export NAMESPACE/NAME",
		Short: "Remove one cluster's export of a Service, also one the registry cannot read",
		Long: `Remove one cluster's export of a Service, with its endpoints. Use it for an export that
describe lists under UNREADABLE: every read skips it, and it stays until removed. An export
the cluster's controller still has is written again at its next sync.`,
		Example: `  mcs-admin --store=dynamodb --region=us-east-1 delete-export --clusterset-id=prod --cluster-id=use1-a dynamo/frontend --yes
  mcs-admin --registry-rest-url=http://localhost:8080 delete-export --clusterset-id=prod --cluster-id=use1-a dynamo/frontend --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, ok := strings.Cut(args[0], "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return command.Usagef("%q: want the Service as NAMESPACE/NAME", args[0])
			}
			if !yes {
				return command.Usagef("this removes the export of %s by cluster %s from clusterset %s; add --yes to do it", args[0], cluster, clusterset)
			}
			ctx := cmd.Context()
			data, where, err := g.data(ctx)
			if err != nil {
				return err
			}
			existed, err := data.DeleteExport(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: cluster}, store.ServiceKey{Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			if !existed {
				return fmt.Errorf("cluster %s of clusterset %s has no export of %s (%s)", cluster, clusterset, args[0], where)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted the export of %s by cluster %s of clusterset %s\n", args[0], cluster, clusterset)
			return nil
		},
	}
	alias(cmd.Flags(), &clusterset, "clusterset-id", "clusterset", "The clusterset (required).")
	alias(cmd.Flags(), &cluster, "cluster-id", "cluster", "The exporting cluster (required).")
	required(cmd, "clusterset-id", "cluster-id")
	cmd.Flags().BoolVar(&yes, "yes", false, "Confirm the deletion.")
	return cmd
}
