// Command mcs-registry serves the registry of a Multi-Cluster Services clusterset: gRPC on
// :9090, the same API as JSON on :8080, and /metrics, /healthz and /readyz on :9091.
package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/app"
)

func main() { command.Main(newCommand(os.Stderr)) }

// newCommand is mcs-registry's command line; the logs go to logs.
func newCommand(logs io.Writer) *cobra.Command {
	var cfg app.Config
	var logging command.Logging
	root := command.NewRoot("mcs-registry", "mcs-registry serves the registry of a Multi-Cluster Services clusterset.", "")
	fs := root.Flags()
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", ":9090", "Address of the gRPC listener.")
	fs.StringVar(&cfg.RESTAddr, "rest-addr", ":8080", "Address of the REST (JSON) listener.")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", ":9091", "Address of the admin listener: /metrics, /healthz, /readyz. Always plaintext.")
	fs.StringVar(&cfg.Store, "store", "memory", "Store: memory (one replica; a restart loses every record) or dynamodb (any number of replicas).")
	fs.StringVar(&cfg.DynamoDBTable, "dynamodb-table", "", "DynamoDB table of the dynamodb store (see mcs-admin create-table).")
	fs.StringVar(&cfg.Region, "region", "", "AWS region of the DynamoDB table; empty: AWS_REGION.")
	fs.StringVar(&cfg.EndpointURL, "endpoint-url", "", "DynamoDB endpoint URL, for a DynamoDB-compatible server; empty: AWS_ENDPOINT_URL_DYNAMODB, else the region's endpoint.")
	fs.DurationVar(&cfg.ReplicationHeartbeatInterval, "replication-heartbeat-interval", 2*time.Second, "With --store=dynamodb: how often this replica writes its replication heartbeat, from which every replica measures the other regions' replication lag (mcs_registry_replication_lag_seconds); 0 turns the heartbeats off.")
	fs.IntVar(&cfg.DynamoDBMaxRequests, "dynamodb-max-requests", 64, "With --store=dynamodb: most requests this replica has in flight to the table at once; more wait in the replica (registrations, renewals and replication heartbeats first), and one whose caller gave up is never sent. 0: no bound.")
	fs.DurationVar(&cfg.ReplicationStallHold, "replication-stall-hold", 2*time.Minute, "With --store=dynamodb and heartbeats: how long past its expiry a lease renewed through another region is held while replication from that region lags (LEASE_STATE_HELD_REPLICATION), so a replication stall between healthy regions costs no endpoints; 0 turns the hold off.")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM certificate; with --tls-key-file, serves TLS on the gRPC and REST listeners.")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file.")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "PEM bundle of the CAs that sign client certificates; when set, the gRPC and REST listeners require one, and each cluster may write only its own records (docs/security.md).")
	fs.StringVar(&cfg.TrustDomain, "trust-domain", "", "SPIFFE trust domain of the client identities, spiffe://<trust-domain>/clusterset/<clusterset>/cluster/<cluster-id>; required with --client-ca-file.")
	admins := fs.String("admin-identities", "", "Comma-separated URI SANs with admin rights besides spiffe://<trust-domain>/admin.")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", 16<<20, "Largest request accepted, in bytes (1 MiB to 256 MiB).")
	fs.IntVar(&cfg.MaxExportsPerCluster, "max-exports-per-cluster", app.DefaultMaxExportsPerCluster, "Most exports one cluster may hold; a write past it is refused with RESOURCE_EXHAUSTED.")
	fs.IntVar(&cfg.MaxBytesPerCluster, "max-bytes-per-cluster", app.DefaultMaxBytesPerCluster, "Most bytes of specs and endpoints (as encoded) one cluster may hold in all its exports; a write past it is refused with RESOURCE_EXHAUSTED.")
	fs.IntVar(&cfg.MaxEndpointsPerCluster, "max-endpoints-per-cluster", app.DefaultMaxEndpointsPerCluster, "Most endpoints one cluster may hold in all its exports; a write past it is refused with RESOURCE_EXHAUSTED.")
	fs.IntVar(&cfg.MaxWatches, "max-watches", app.DefaultMaxWatches, "Most WatchImports streams open at once (gRPC and REST).")
	fs.IntVar(&cfg.MaxWatchesPerClient, "max-watches-per-client", app.DefaultMaxWatchesPerClient, "Most WatchImports streams open at once by one client: its certificate identity with --client-ca-file, else its IP address.")
	fs.Float64Var(&cfg.ClientRate, "client-rate", app.DefaultClientRate, "Units a second each client may spend on this replica (a request costs 1, and 1 more for every 16 KiB of its message); past its share a request is refused before it is read, with RESOURCE_EXHAUSTED and a retry hint. 0: no limit.")
	fs.Float64Var(&cfg.ClientBurst, "client-burst", app.DefaultClientBurst, "Units each client may spend at once, above --client-rate; at least the cost of the largest request.")
	fs.DurationVar(&cfg.SendTimeout, "send-timeout", app.DefaultSendTimeout, "How long one watch message or REST answer may wait to be sent before the watch or call is closed.")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", app.DefaultIdleTimeout, "A gRPC or REST connection with no call for this long is closed.")
	fs.IntVar(&cfg.MaxConnections, "max-connections", app.DefaultMaxConnections, "Most connections open at once on each of the gRPC and REST listeners; more wait to be accepted.")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "How long a graceful shutdown waits for in-flight requests.")
	logging.AddFlags(fs)
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		for _, a := range strings.Split(*admins, ",") {
			if a = strings.TrimSpace(a); a != "" {
				cfg.AdminIdentities = append(cfg.AdminIdentities, a)
			}
		}
		log, err := logging.Logger(cmd, logs)
		if err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return command.AsUsage(err)
		}
		return app.Run(cmd.Context(), cfg, log)
	}
	return root
}
