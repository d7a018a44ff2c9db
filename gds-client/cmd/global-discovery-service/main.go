// Command global-discovery-service serves the Global Router pools and replicas found in
// imported EndpointSlices on /pools and /routers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/httpapi"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/internal/version"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("global-discovery-service", flag.ContinueOnError)
	listen := fs.String("listen", "0.0.0.0:8080", "Address to serve /pools, /routers, /healthz, /readyz and /metrics on.")
	mode := fs.String("pool-discovery", "mcs", "Whose imports to read: mcs (mcs-controller) or karmada.")
	var cfg discovery.Config
	fs.StringVar(&cfg.RouterNamespace, "router-namespace", "", "Namespace of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterService, "router-service", "", "Name of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterPortName, "router-port-name", "", "Name of the router Service's TCP port that PoolRelays connect to. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.PoolServiceSuffix, "pool-service-suffix", discovery.DefaultPoolServiceSuffix, "Suffix of each pool's PoolRelay Service name, <dgd><suffix>.")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig file; empty: $KUBECONFIG, else the in-cluster configuration.")
	logLevel := fs.String("log-level", "info", "Log level: debug, info, warn or error.")
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	if err := fs.Parse(os.Args[1:]); err != nil {
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
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("version", version.Version)
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

func loadConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}
