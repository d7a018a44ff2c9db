// Command mcs-controller runs in every member cluster of a clusterset: it keeps the
// cluster registered with mcs-registry, sends the cluster's ServiceExports and their
// endpoints to it, and writes the clusterset's imports into the cluster.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/app"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/version"
)

func main() { os.Exit(run(os.Args[1:])) }

// run returns the exit code: 0, 1 for a runtime error, 2 for a usage error.
func run(args []string) int {
	if len(args) > 0 && args[0] == "cleanup" {
		return cleanup(args[1:])
	}
	var o app.Options
	fs := pflag.NewFlagSet("mcs-controller", pflag.ContinueOnError)
	fs.AddGoFlagSet(flag.CommandLine) // controller-runtime's --kubeconfig
	o.AddFlags(fs)
	if done, code := app.ParseFlags(fs, "mcs-controller keeps this cluster registered with mcs-registry, sends its exports and writes its imports.\n'mcs-controller cleanup --help': the uninstall cleanup.", args); done {
		return code
	}
	if o.ShowVersion {
		fmt.Println("mcs-controller", version.String())
		return 0
	}
	log, err := app.NewLogger(o.LogFormat, o.LogLevel)
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller: %v\n", err)
		return 2
	}
	app.RouteLogs(log)
	if err := app.Run(ctrl.SetupSignalHandler(), o, log); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller: %v\n", err)
		return 1
	}
	return 0
}

// cleanup is "mcs-controller cleanup": for an uninstall, it removes what the controller
// wrote into the cluster once the controller has stopped.
func cleanup(args []string) int {
	var o app.CleanupOptions
	fs := pflag.NewFlagSet("mcs-controller cleanup", pflag.ContinueOnError)
	o.AddFlags(fs)
	if done, code := app.ParseFlags(fs, "mcs-controller cleanup removes what the controller wrote into the cluster, for an uninstall, once the controller has stopped.", args); done {
		return code
	}
	log, err := app.NewLogger(o.LogFormat, o.LogLevel)
	if err == nil && o.Kubeconfig != "" {
		// controller-runtime's config loader reads its own --kubeconfig flag.
		err = flag.CommandLine.Set("kubeconfig", o.Kubeconfig)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller cleanup: %v\n", err)
		return 2
	}
	app.RouteLogs(log)
	if err := app.Cleanup(ctrl.SetupSignalHandler(), o, log); err != nil {
		fmt.Fprintf(os.Stderr, "mcs-controller cleanup: %v\n", err)
		return 1
	}
	return 0
}
