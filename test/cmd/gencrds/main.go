// Command gencrds writes the chart's CRDs (charts/global-discovery-mcs/files/crds):
// ServiceExport and ServiceImport copied byte for byte from the sigs.k8s.io/mcs-api module
// (the version test/go.mod pins), and the ClusterProperty CRD this project writes.
// `make generate` runs it; never edit the output.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	mcscrd "sigs.k8s.io/mcs-api/config/crd"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gencrds <chart crds dir>")
		os.Exit(2)
	}
	dir := os.Args[1]
	files := map[string][]byte{
		"multicluster.x-k8s.io_serviceexports.yaml": mcscrd.ServiceExportCRD,
		"multicluster.x-k8s.io_serviceimports.yaml": mcscrd.ServiceImportCRD,
		"about.k8s.io_clusterproperties.yaml":       harness.ClusterPropertyCRD(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
