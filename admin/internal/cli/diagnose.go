package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/admin/internal/diagnose"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
)

func diagnoseCmd(g *globals) *cobra.Command {
	var (
		contexts                []string
		kubeconfig, clusterset  string
		output                  string
		namespace, sa, leaderID string
		clientCertSecret        string
		gds                     diagnose.GDSOptions
	)
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Check every member cluster (and the registry) and print OK, WARN or FAIL with the fix for each check",
		Long: `diagnose checks each member cluster through its kubeconfig context: the CRDs serve
v1beta1, a controller replica leads, the ServiceExports and ServiceImports are free of
conflicts, held and refused endpoints, the controller's ServiceAccount has the permissions
the controller needs, and the API server's clock agrees with this machine's. With
--registry-rest-url it checks the registry too: its connection, serving certificate and
clock, and each cluster's lease in it. With the controller's client certificate Secret it
checks its expiry, and with --gds-router-service it counts the pools and routers the Global
Discovery Service finds in each cluster. It exits 0 when every check is OK, 1 otherwise.`,
		Example: `  mcs-admin diagnose --context=use1-a --context=usw2-a
  mcs-admin --registry-rest-url=https://mcs-registry.example.internal:8080 --registry-tls-ca-file=ca.crt \
    diagnose --clusterset-id=prod --context=use1-a --context=usw2-a -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return command.Usagef("-o %q: must be table or json", output)
			}
			if g.registryURL != "" && clusterset == "" {
				return command.Usagef("--clusterset-id: required with --registry-rest-url")
			}
			if len(contexts) == 0 {
				contexts = []string{""}
			}
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, mcsv1beta1.Install} {
				if err := add(scheme); err != nil {
					return err
				}
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			if kubeconfig != "" {
				rules.ExplicitPath = kubeconfig
			}
			var members []diagnose.Member
			for _, name := range contexts {
				cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name})
				cfg, err := cc.ClientConfig()
				if err != nil {
					return command.AsUsage(fmt.Errorf("--context %q: %w", name, err))
				}
				if name == "" {
					raw, err := cc.RawConfig()
					if err != nil {
						return err
					}
					name = raw.CurrentContext
				}
				// A diagnosis is a bounded number of reads (about 40 per cluster, 22 of them
				// SubjectAccessReviews): client-go's default limit (5 a second after a burst
				// of 10) made every run take about 5 s.
				cfg.QPS, cfg.Burst = 100, 100
				c, err := client.New(cfg, client.Options{Scheme: scheme})
				if err != nil {
					return fmt.Errorf("--context %q: %w", name, err)
				}
				members = append(members, diagnose.Member{Context: name, Config: cfg, Client: c})
			}
			report := diagnose.Run(cmd.Context(), members, diagnose.Options{
				Clusterset: clusterset, ControllerNamespace: namespace, ServiceAccount: sa, LeaderElectionID: leaderID,
				Registry:         diagnose.RegistryOptions{URL: g.registryURL, CAFile: g.registryCAFile, CertFile: g.registryCertFile, KeyFile: g.registryKeyFile},
				ClientCertSecret: clientCertSecret, GDS: gds,
			})
			if err := report.Write(cmd.OutOrStdout(), output); err != nil {
				return err
			}
			if n := report.NotOK(); n > 0 {
				return fmt.Errorf("%d check(s) not OK", n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&contexts, "context", nil, "A member cluster's kubeconfig context; repeat for each cluster. Default: the current context.")
	f.StringVar(&kubeconfig, "kubeconfig", "", "The kubeconfig file; empty: KUBECONFIG, else ~/.kube/config.")
	f.StringVar(&clusterset, "clusterset-id", "", "The clusterset, for the registry's checks (required with --registry-rest-url).")
	f.StringVar(&namespace, "controller-namespace", "mcs-system", "The namespace of the controller's release.")
	f.StringVar(&sa, "controller-service-account", "mcs-controller", "The controller's ServiceAccount.")
	f.StringVar(&leaderID, "leader-election-id", "mcs-controller.multicluster.dynamo.nvidia.com", "The controller's leader-election Lease (its --leader-election-id).")
	f.StringVar(&clientCertSecret, "controller-client-cert-secret", "", "The Secret of the controller's client certificate for the registry, whose expiry is checked; empty: the one the chart's controller Deployment mounts, if any.")
	f.StringVar(&gds.RouterNamespace, "gds-router-namespace", "", "With --gds-router-service: the Global Discovery Service's --router-namespace.")
	f.StringVar(&gds.RouterService, "gds-router-service", "", "The Global Discovery Service's --router-service: count the pools and routers it finds in each cluster.")
	f.StringVar(&gds.RouterPortName, "gds-router-port-name", "", "With --gds-router-service: the Global Discovery Service's --router-port-name.")
	f.StringVarP(&output, "output", "o", "table", "Output format: table or json.")
	return cmd
}
