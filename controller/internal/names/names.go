// Package names holds the names this controller puts on Kubernetes objects, shared by the
// exporter, the importer and the cleanup, so none of them imports another for a constant.
package names

const (
	// ManagedByLabel marks the ServiceImports and derived Services this controller owns.
	ManagedByLabel = "multicluster.dynamo.nvidia.com/managed-by"
	// ManagedBy is the controller's value for ManagedByLabel and for
	// endpointslice.kubernetes.io/managed-by: slices carrying it are imports and are never
	// exported again.
	ManagedBy = "mcs-controller.dynamo.nvidia.com"
	// DerivedServiceAnnotation on a ServiceImport names its derived Service.
	DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
	// Finalizer keeps a ServiceExport until its export is removed from the registry.
	Finalizer = "multicluster.dynamo.nvidia.com/service-export"
)
