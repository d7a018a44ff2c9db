// Command example lists the clusters of a clusterset and watches its ServiceImports through
// the generated Go client of the registry API. It prints one JSON line for the clusters,
// then one per change of its view of the imports (a snapshot, however many pages it took,
// or a delta), and exits after --events of them (0: never).
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
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/importdelta"
)

func main() {
	addr := flag.String("registry", "localhost:9090", "the registry's gRPC address (host:port)")
	clusterset := flag.String("clusterset", "", "the clusterset id")
	events := flag.Int("events", 0, "exit after this many changes of the view; 0: watch until interrupted")
	pageSize := flag.Int("page-size", 256, "imports per snapshot message (1 to 10000)")
	flag.Parse()
	if *clusterset == "" {
		fmt.Fprintln(os.Stderr, "--clusterset is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *addr, *clusterset, *events, *pageSize); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, addr, clusterset string, events, pageSize int) error {
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

	// Cluster deltas (an endpoint change sends only that cluster's part of the import) and
	// snapshots in pages, as the controller watches; importdelta.View puts them together.
	watch, err := client.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: clusterset, IncludeEndpoints: true,
		ClusterDeltas: true, SnapshotPageSize: int32(pageSize)})
	if err != nil {
		return fmt.Errorf("watch imports: %w", err)
	}
	view := importdelta.NewView()
	for n := 0; events == 0 || n < events; {
		msg, err := watch.Recv()
		if err != nil {
			return fmt.Errorf("watch imports: %w", err)
		}
		changed, done := view.Apply(msg)
		if !done {
			continue // a page of a snapshot: the view changes at its last page
		}
		slices.Sort(changed)
		// One line per change of the view: the Services changed, and for each that is still
		// imported, its endpoint addresses by source cluster. Resume after a disconnect with
		// resume_epoch and resume_revision (view.Epoch, view.Revision), after
		// view.StreamEnded().
		upserts, deletes, addrs := []string{}, []string{}, map[string]map[string][]string{}
		for _, k := range changed {
			imp, ok := view.Imports[k]
			if !ok {
				deletes = append(deletes, k)
				continue
			}
			upserts = append(upserts, k)
			addrs[k] = addresses(imp)
		}
		if err := enc.Encode(map[string]any{"revision": view.Revision, "snapshot": view.Snapshot,
			"upserts": upserts, "deletes": deletes, "endpoints": addrs}); err != nil {
			return err
		}
		n++
	}
	return nil
}

// addresses lists an import's endpoint addresses by source cluster.
func addresses(imp *registryv1.ServiceImport) map[string][]string {
	out := map[string][]string{}
	for _, c := range imp.GetClusters() {
		list := []string{}
		for _, g := range c.GetEndpointGroups() {
			for _, e := range g.GetEndpoints() {
				list = append(list, e.GetAddresses()...)
			}
		}
		out[c.GetClusterId()] = list
	}
	return out
}
