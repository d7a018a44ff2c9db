// Package api holds the JSON documents the Global Discovery Service serves on /pools and
// /routers. They are versioned by APIVersion: fields are only ever added within a version.
package api

// APIVersion names this version of the documents. Every response carries it.
const APIVersion = "gds.dynamo.nvidia.com/v1"

// PoolKey identifies a Global Router pool: one DynamoGraphDeployment (DGD) in one namespace
// of one source cluster.
type PoolKey struct {
	// ClusterID is the cluster that exports the pool's PoolRelay Service.
	ClusterID string `json:"cluster_id"`
	Namespace string `json:"namespace"`
	// DGDName is the PoolRelay Service name without the pool service suffix.
	DGDName string `json:"dgd_name"`
}

// Port is a port of an endpoint.
type Port struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
}

// Endpoint is one endpoint of a pool's PoolRelay Service.
type Endpoint struct {
	// Address is the pod address in the source cluster.
	Address string `json:"address"`
	// Ready follows Kubernetes: an endpoint whose ready condition is unset is ready.
	Ready bool `json:"ready"`
	// TargetPod is the Pod behind the endpoint, when the source reported it.
	TargetPod string `json:"target_pod,omitempty"`
	Hostname  string `json:"hostname,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Ports     []Port `json:"ports"`
}

// Pool is a Global Router pool: its PoolRelay Service has at least one Ready endpoint.
type Pool struct {
	Key PoolKey `json:"key"`
	// Service is the PoolRelay Service, <dgd_name><suffix>.
	Service string `json:"service"`
	// Region is the source cluster's region, when the importer names it (mcs mode).
	Region string `json:"region,omitempty"`
	// Tier is the nearest locality tier the source cluster is in, seen from the cluster the
	// discovery runs in: "cluster" (that cluster itself), "region" (its region) or "any";
	// empty when the importer does not say (Karmada). Prefer pools of the nearest tier.
	Tier string `json:"tier,omitempty"`
	// Endpoints of the PoolRelay Service in the source cluster, ready or not, by address.
	Endpoints []Endpoint `json:"endpoints"`
}

// Router is one Ready Global Router replica.
type Router struct {
	// ID is <cluster_id>/<replica>.
	ID        string `json:"id"`
	ClusterID string `json:"cluster_id"`
	// Replica is the endpoint's Pod name, else its hostname, else its address.
	Replica string `json:"replica"`
	Address string `json:"address"`
	// URL is http://<address>:<port> on the router port; IPv6 addresses are bracketed.
	URL string `json:"url"`
}

// PoolsResponse is the body of GET /pools: pools sorted by cluster id, namespace, DGD name.
type PoolsResponse struct {
	APIVersion string `json:"api_version"`
	Pools      []Pool `json:"pools"`
}

// RoutersResponse is the body of GET /routers: routers sorted by id.
type RoutersResponse struct {
	APIVersion string   `json:"api_version"`
	Routers    []Router `json:"routers"`
}
