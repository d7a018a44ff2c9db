// Package controller is the module of mcs-controller, which runs in every member cluster:
// it sends the cluster's ServiceExports to the registry and writes the imports of the
// clusterset into the cluster.
package controller
