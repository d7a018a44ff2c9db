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
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/httpapi"
	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
)

func main() { command.Main(newCommand(os.Stderr)) }

// newCommand is global-discovery-service's command line; the logs go to logs.
func newCommand(logs io.Writer) *cobra.Command {
	root := command.NewRoot("global-discovery-service",
		"global-discovery-service serves the Global Router pools and replicas of imported EndpointSlices.", "")
	fs := root.Flags()
	addr := fs.String("http-addr", "0.0.0.0:8080", "Address to serve /pools, /routers, /healthz, /readyz and /metrics on.")
	command.Alias(fs, "http-addr", "listen")
	mode := fs.String("pool-discovery", "mcs", "Whose imports to read: mcs (mcs-controller) or karmada.")
	var cfg discovery.Config
	fs.StringVar(&cfg.RouterNamespace, "router-namespace", "", "Namespace of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterService, "router-service", "", "Name of the exported Global Router Service. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.RouterPortName, "router-port-name", "", "Name of the router Service's TCP port that PoolRelays connect to. Required with --pool-discovery mcs.")
	fs.StringVar(&cfg.PoolServiceSuffix, "pool-service-suffix", discovery.DefaultPoolServiceSuffix, "Suffix of each pool's PoolRelay Service name, <dgd><suffix>.")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig file; empty: the files of $KUBECONFIG (a list), else ~/.kube/config, else the in-cluster configuration.")
	var logging command.Logging
	logging.AddFlags(fs)
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := logging.Logger(cmd, logs)
		if err != nil {
			return err
		}
		// client-go's informers log through klog: into the same stream, not as text lines.
		klog.SetSlogLogger(log)
		cfg.Mode = discovery.Mode(*mode)
		if err := cfg.Validate(); err != nil {
			return command.AsUsage(err)
		}
		return serve(cmd.Context(), cfg, *addr, *kubeconfig, log)
	}
	return root
}

// serve runs the discovery and its HTTP API until ctx ends or either fails.
func serve(ctx context.Context, cfg discovery.Config, addr, kubeconfig string, log *slog.Logger) error {
	restCfg, err := loadConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gds_build_info",
		Help: "Always 1; the labels say what the binary was built from."}, []string{"version", "commit", "build_date", "go_version"})
	buildInfo.WithLabelValues(buildinfo.Version, buildinfo.Commit, buildinfo.BuildDate, runtime.Version()).Set(1)
	reg.MustRegister(buildInfo)
	m := httpapi.NewMetrics(reg)
	d, err := discovery.New(cfg, cs, log, m.Observer())
	if err != nil {
		return command.AsUsage(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http-addr: %w", err)
	}
	srv := &http.Server{Handler: httpapi.Handler(d, m), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- d.Run(ctx) }()
	go func() { errc <- srv.Serve(lis) }()
	log.Info("global-discovery-service serving", "http_addr", lis.Addr().String(), "pool_discovery", cfg.Mode,
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
		return runErr
	}
	return nil
}

// loadConfig loads the kubeconfig the way kubectl does: --kubeconfig, else the files of
// $KUBECONFIG merged, else ~/.kube/config; with none of them, the in-cluster configuration.
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
