// Command mcs-fleet simulates a fleet of member clusters against a registry (package
// fleet) and prints, one JSON object per line, each phase as it begins and ends and the
// figures it measured: the fleet converges (every cluster's watch holds every cluster's
// exports), then runs in steady state for --steady, then under readiness churn for
// --churn; with --restart it then prints restart_await, waits for a line on its standard
// input (sent as the registry is restarted or a replica stopped) and measures until the
// fleet is served again. A load generator for docs/registry.md ("Scale"); not part of a
// release. Unless GOMEMLIMIT says otherwise, it keeps its heap near 6 GiB: a thousand
// watches each receiving a snapshot at once would otherwise grow it far beyond.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // served only with --pprof-addr, by a local load generator
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/fleet"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcs-fleet:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		urls, regions                  string
		cfg                            fleet.Config
		steady, churn, flipWait, limit time.Duration
		rate                           float64
		pprofAddr                      string
		restart                        bool
		seed                           int
	)
	fs := flag.NewFlagSet("mcs-fleet", flag.ContinueOnError)
	fs.StringVar(&urls, "registry-url", "", "The registry's gRPC URLs, http:// only, comma-separated in failover order; with one per region (as many as --regions, in the same order), each cluster starts from its own region's.")
	fs.StringVar(&cfg.Clusterset, "clusterset", "fleet", "The clusterset the simulated clusters join.")
	fs.IntVar(&cfg.Clusters, "clusters", 100, "Simulated member clusters.")
	fs.IntVar(&cfg.Services, "services", 20, "Services each cluster exports (the same names in every cluster).")
	fs.IntVar(&cfg.Endpoints, "endpoints", 10, "Endpoints of each export.")
	fs.StringVar(&regions, "regions", "sim", "Regions, comma-separated; cluster i is in the (i mod n)th.")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", 30*time.Second, "Each cluster's lease (the controller's --lease-duration).")
	fs.DurationVar(&cfg.RenewInterval, "renew-interval", 10*time.Second, "The controller's --renew-interval.")
	fs.IntVar(&cfg.VerifyEvery, "verify-exports-every", 6, "The controller's --verify-exports-every.")
	fs.DurationVar(&cfg.StartSpread, "start-spread", 0, "The clusters start evenly over this long.")
	fs.IntVar(&seed, "seed", 1, "Seed of the churn's choices.")
	fs.DurationVar(&limit, "converge-timeout", 5*time.Minute, "How long the fleet may take to converge.")
	fs.DurationVar(&steady, "steady", 30*time.Second, "The steady-state phase after convergence, without churn.")
	fs.DurationVar(&churn, "churn", 30*time.Second, "The churn phase.")
	fs.Float64Var(&rate, "churn-rate", 5, "Readiness flips per second during the churn phase, fleet-wide.")
	fs.DurationVar(&flipWait, "flip-wait", 30*time.Second, "How long a flip is awaited in every cluster before it counts as missed.")
	fs.BoolVar(&restart, "restart", false, "After the churn, measure a registry restart (see above).")
	fs.StringVar(&pprofAddr, "pprof-addr", "", "Serve Go's profiles (/debug/pprof) of the simulator here; empty: none.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(6 << 30)
	}
	if pprofAddr != "" {
		go func() { _ = http.ListenAndServe(pprofAddr, nil) }() //nolint:gosec // a local load generator's profiles
	}
	if rate <= 0 {
		return fmt.Errorf("--churn-rate %g: must be positive", rate)
	}
	targets, err := registryclient.ParseURLs(strings.Split(urls, ","), true)
	if err != nil {
		return err
	}
	cfg.Targets, cfg.Regions, cfg.Seed = targets, strings.Split(regions, ","), uint64(seed) //nolint:gosec // any seed will do
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f, err := fleet.New(cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	out := json.NewEncoder(os.Stdout)
	say := func(v map[string]any) { _ = out.Encode(v) }
	start := time.Now()
	say(map[string]any{"event": "start", "clusters": cfg.Clusters, "services": cfg.Services, "endpoints": cfg.Endpoints})
	f.Start(ctx)
	select {
	case <-f.Converged():
	case <-time.After(limit):
		verifies, verifyErrors, syncs, syncErrors := f.Calls()
		return fmt.Errorf("not converged after %s: %d of %d cluster views of a Service hold every cluster (export checks %d, failed %d; syncs %d, failed %d; last error: %q)",
			limit, f.Complete(), cfg.Clusters*cfg.Services, verifies, verifyErrors, syncs, syncErrors, f.LastError())
	case <-ctx.Done():
		return ctx.Err()
	}
	say(map[string]any{"event": "converged", "seconds": time.Since(start).Seconds(), "watch_bytes": f.WatchBytes()})

	bytes0 := f.WatchBytes()
	say(map[string]any{"event": "steady_begin"})
	select {
	case <-time.After(steady):
	case <-ctx.Done():
		return ctx.Err()
	}
	verifies, verifyErrors, syncs, syncErrors := f.Calls()
	say(map[string]any{"event": "steady_end", "seconds": steady.Seconds(), "watch_bytes": f.WatchBytes() - bytes0,
		"verifies": verifies, "verify_errors": verifyErrors, "syncs": syncs, "sync_errors": syncErrors, "last_error": f.LastError()})

	say(map[string]any{"event": "churn_begin", "rate": rate})
	r := f.Churn(ctx, rate, churn, flipWait)
	say(map[string]any{"event": "churn_end", "seconds": churn.Seconds(), "churn": r})
	if ctx.Err() != nil || !restart {
		return ctx.Err()
	}

	say(map[string]any{"event": "restart_await"})
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the restart on standard input: %w", err)
	}
	back, err := f.Restart(ctx, limit)
	if err != nil {
		return err
	}
	say(map[string]any{"event": "restart_end", "restart": back})
	return nil
}
