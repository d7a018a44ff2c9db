// Command mcs-registry serves the registry of a Multi-Cluster Services clusterset: gRPC on
// :9090, the same API as JSON on :8080, and /metrics, /healthz and /readyz on :9091.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/app"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 0, 1 for a runtime error, 2 for a usage error (a flag or
// its value); --help prints the flags on stdout and exits 0.
func run(args []string) int {
	var cfg app.Config
	fs := pflag.NewFlagSet("mcs-registry", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", ":9090", "Address of the gRPC listener.")
	fs.StringVar(&cfg.RESTAddr, "rest-addr", ":8080", "Address of the REST (JSON) listener.")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", ":9091", "Address of the admin listener: /metrics, /healthz, /readyz. Always plaintext.")
	fs.StringVar(&cfg.Store, "store", "memory", "Store: memory (one replica; a restart loses every record) or dynamodb (any number of replicas).")
	fs.StringVar(&cfg.DynamoDBTable, "dynamodb-table", "", "DynamoDB table of the dynamodb store (see mcs-admin create-table).")
	fs.StringVar(&cfg.Region, "region", "", "AWS region of the DynamoDB table; empty: AWS_REGION.")
	fs.StringVar(&cfg.EndpointURL, "endpoint-url", "", "DynamoDB endpoint URL, for a DynamoDB-compatible server; empty: AWS_ENDPOINT_URL_DYNAMODB, else the region's endpoint.")
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
	logLevel := fs.String("log-level", "info", "Log level: debug, info, warn or error.")
	logFormat := fs.String("log-format", "json", "Log format: json or text.")
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Printf("mcs-registry serves the registry of a Multi-Cluster Services clusterset.\n\nUsage:\n  mcs-registry [flags]\n\nFlags:\n%s", fs.FlagUsages())
			return 0
		}
		fmt.Fprintf(os.Stderr, "mcs-registry: %v\nRun 'mcs-registry --help' for the flags.\n", err)
		return 2
	}
	for _, a := range strings.Split(*admins, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.AdminIdentities = append(cfg.AdminIdentities, a)
		}
	}
	if *showVersion {
		fmt.Println("mcs-registry", version.String())
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-registry: --log-level: %v\n", err)
		return 2
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch *logFormat {
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	default:
		fmt.Fprintf(os.Stderr, "mcs-registry: --log-format: %q must be json or text\n", *logFormat)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-registry: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := app.Run(ctx, cfg, log.With("version", version.Version)); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-registry: %v\n", err)
		return 1
	}
	return 0
}
