// Command global-discovery-service serves the Global Router pools and replicas found in
// imported EndpointSlices on /pools and /routers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/httpapi"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/internal/version"
)

func main() { os.Exit(run(os.Args[1:])) }

// run returns the exit code: 0, 1 for a runtime error, 2 for a usage error (a flag or
// its value); --help prints the flags on stdout and exits 0.
func run(args []string) int {
	fs := pflag.NewFlagSet("global-discovery-service", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	listen := fs.String("listen", "0.0.0.0:8080", "Address to serve /pools, /routers, /healthz, /readyz and /metrics on.")
	mode := fs.String("pool-discovery", "mcs", "Whose imports to read: mcs (mcs-controller) or karmada.")
	var cfg discovery.Config
	fs.StringVar(&cfg.RouterNamespace, "router-namespace", "", "Namespace of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterService, "router-service", "", "Name of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterPortName, "router-port-name", "", "Name of the router Service's TCP port that PoolRelays connect to. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.PoolServiceSuffix, "pool-service-suffix", discovery.DefaultPoolServiceSuffix, "Suffix of each pool's PoolRelay Service name, <dgd><suffix>.")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig file; empty: the files of $KUBECONFIG (a list), else ~/.kube/config, else the in-cluster configuration.")
	logLevel := fs.String("log-level", "info", "Log level: debug, info, warn or error.")
	logFormat := fs.String("log-format", "json", "Log format: json or text.")
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Printf("global-discovery-service serves the Global Router pools and replicas of imported EndpointSlices.\n\nUsage:\n  global-discovery-service [flags]\n\nFlags:\n%s", fs.FlagUsages())
			return 0
		}
		fmt.Fprintf(os.Stderr, "global-discovery-service: %v\nRun 'global-discovery-service --help' for the flags.\n", err)
		return 2
	}
	if *showVersion {
		fmt.Println("global-discovery-service", version.String())
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: --log-level: %v\n", err)
		return 2
	}
	var handler slog.Handler
	switch *logFormat {
	case "json":
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	case "text":
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	default:
		fmt.Fprintf(os.Stderr, "global-discovery-service: --log-format: %q must be json or text\n", *logFormat)
		return 2
	}
	log := slog.New(handler).With("version", version.Version)
	// client-go's informers log through klog: into the same stream, not as text lines.
	klog.SetSlogLogger(log)
	cfg.Mode = discovery.Mode(*mode)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: %v\n", err)
		return 2
	}
	restCfg, err := loadConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: kubeconfig: %v\n", err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: %v\n", err)
		return 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gds_build_info",
		Help: "Always 1; the labels say what the binary was built from."}, []string{"version", "commit", "build_date", "go_version"})
	buildInfo.WithLabelValues(version.Version, version.Commit, version.BuildDate, runtime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	m := httpapi.NewMetrics(reg)
	d, err := discovery.New(cfg, cs, log, m.Observer())
	if err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "global-discovery-service: --listen: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: httpapi.Handler(d, m), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- d.Run(ctx) }()
	go func() { errc <- srv.Serve(lis) }()
	log.Info("global-discovery-service serving", "listen", lis.Addr().String(), "pool_discovery", cfg.Mode,
		"router", cfg.RouterNamespace+"/"+cfg.RouterService, "router_port_name", cfg.RouterPortName, "pool_service_suffix", cfg.PoolServiceSuffix)
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "global-discovery-service: %v\n", runErr)
		return 1
	}
	return 0
}

// loadConfig loads the kubeconfig the way kubectl does: --kubeconfig, else the files of
// $KUBECONFIG merged, else ~/.kube/config; with none of them, the in-cluster configuration.
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
