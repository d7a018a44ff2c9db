// Command example lists the clusters of a clusterset and watches its ServiceImports through
// the generated Go client of the registry API. It prints one JSON line for the clusters,
// then one per watch message, and exits after --events messages (0: never).
//
//	go run . --registry localhost:9090 --clusterset prod --events 2
//
// It dials plaintext, as an evaluation registry serves; a production registry needs
// credentials.NewTLS with the registry's CA and, with --client-ca-file, a client certificate.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func main() {
	addr := flag.String("registry", "localhost:9090", "the registry's gRPC address (host:port)")
	clusterset := flag.String("clusterset", "", "the clusterset id")
	events := flag.Int("events", 0, "exit after this many watch messages; 0: watch until interrupted")
	flag.Parse()
	if *clusterset == "" {
		fmt.Fprintln(os.Stderr, "--clusterset is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *addr, *clusterset, *events); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, addr, clusterset string, events int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	client := registryv1.NewRegistryServiceClient(conn)
	enc := json.NewEncoder(out)

	clusters, err := client.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: clusterset})
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	type cluster struct {
		ClusterID string `json:"clusterId"`
		Region    string `json:"region"`
		State     string `json:"state"`
	}
	list := []cluster{}
	for _, c := range clusters.GetClusters() {
		list = append(list, cluster{c.GetClusterId(), c.GetRegion(), c.GetLease().GetState().String()})
	}
	if err := enc.Encode(map[string]any{"clusters": list}); err != nil {
		return err
	}

	watch, err := client.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: clusterset})
	if err != nil {
		return fmt.Errorf("watch imports: %w", err)
	}
	for n := 0; events == 0 || n < events; n++ {
		msg, err := watch.Recv()
		if err != nil {
			return fmt.Errorf("watch imports: %w", err)
		}
		// A snapshot replaces what the client holds; otherwise upserts and deletes apply
		// in order. Resume after a disconnect with resume_epoch and resume_revision.
		upserts, deletes := []string{}, []string{}
		for _, imp := range msg.GetUpserts() {
			upserts = append(upserts, key(imp.GetService()))
		}
		for _, k := range msg.GetDeletes() {
			deletes = append(deletes, key(k))
		}
		if err := enc.Encode(map[string]any{"revision": msg.GetRevision(), "snapshot": msg.GetSnapshot(), "upserts": upserts, "deletes": deletes}); err != nil {
			return err
		}
	}
	return nil
}

func key(k *registryv1.ServiceKey) string { return k.GetNamespace() + "/" + k.GetName() }
