// Command mcs-controller runs in every member cluster of a clusterset: it keeps the
// cluster registered with mcs-registry, sends the cluster's ServiceExports and their
// endpoints to it, and writes the clusterset's imports into the cluster.
package main

import (
	"flag"
	"io"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/app"
	"github.com/ai-dynamo/global-discovery-mcs/internal/command"
)

func main() {
	os.Exit(command.Execute(ctrl.SetupSignalHandler(), newCommand(os.Stderr), os.Args[1:], os.Stdout, os.Stderr))
}

// newCommand is mcs-controller's command line; the logs go to logs.
func newCommand(logs io.Writer) *cobra.Command {
	var o app.Options
	root := command.NewRoot("mcs-controller",
		"mcs-controller keeps this cluster registered with mcs-registry, sends its exports and writes its imports.", "")
	root.Flags().AddGoFlagSet(flag.CommandLine) // controller-runtime's --kubeconfig
	o.AddFlags(root.Flags())
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := o.Logging.Logger(cmd, logs)
		if err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return command.AsUsage(err)
		}
		app.RouteLogs(log)
		return app.Run(cmd.Context(), o, log)
	}
	root.AddCommand(cleanupCommand(logs))
	return root
}

// cleanupCommand is "mcs-controller cleanup": for an uninstall, it removes what the
// controller wrote into the cluster once the controller has stopped.
func cleanupCommand(logs io.Writer) *cobra.Command {
	var o app.CleanupOptions
	cmd := command.NewSub("cleanup", "Remove what the controller wrote into the cluster, for an uninstall, once the controller has stopped.", "")
	o.AddFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := o.Logging.Logger(cmd, logs)
		if err != nil {
			return err
		}
		if o.Kubeconfig != "" {
			// controller-runtime's config loader reads its own --kubeconfig flag.
			if err := flag.CommandLine.Set("kubeconfig", o.Kubeconfig); err != nil {
				return command.AsUsage(err)
			}
		}
		app.RouteLogs(log)
		return app.Cleanup(cmd.Context(), o, log)
	}
	return cmd
}
