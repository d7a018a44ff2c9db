package harness

import (
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

//go:embed crds/about.k8s.io_clusterproperties.yaml
var clusterPropertyCRD []byte

// Cluster is one running local Kubernetes cluster.
type Cluster struct {
	// Name is the name given in ClusterOptions (cluster-0, cluster-1, … by default).
	Name string
	// Config is an admin client configuration.
	Config *rest.Config
	// Client is a controller-runtime client with the built-in types and the MCS v1beta1 types.
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file for kubectl and the project's binaries.
	Kubeconfig string
	// ServiceCIDR is the cluster's service IP range.
	ServiceCIDR string
	// Nodes are the cluster's real nodes (ClusterOptions.Nodes); none by default.
	Nodes []*Node
	// PodCIDR is the pod range of a cluster with nodes.
	PodCIDR string
	// DNSIP is the ClusterIP of the cluster's DNS (kube-system/kube-dns) when it has nodes.
	DNSIP string

	env     *envtest.Environment
	apiPort int
	certDir string
	// stops are run, last first, when the cluster stops: a restarted kube-apiserver.
	mu    sync.Mutex
	stops []func()
}

// ClusterOptions configure StartClusters.
type ClusterOptions struct {
	// Names of the clusters; its length is the number of clusters. Default: one cluster.
	Names []string
	// Dir receives one kubeconfig per cluster (<name>.kubeconfig). Default: a test temp dir.
	Dir string
	// SkipCRDs leaves the MCS and ClusterProperty CRDs out.
	SkipCRDs bool
	// Nodes gives every cluster one real node (containerd, kubelet and kube-proxy in the
	// node's own network namespace), kube-scheduler, the controllers of a real cluster and
	// CoreDNS, so Deployments run real pods from locally built images. Needs root, and the
	// Debian packages .ci/run installs; see docs/development.md.
	Nodes bool
	// NodeLabels are labels of each cluster's node, by cluster name (for example the
	// topology.kubernetes.io/region the controller reads); default: none.
	NodeLabels map[string]map[string]string
}

// ClusterPropertyCRD returns the ClusterProperty CRD (YAML) this project writes.
func ClusterPropertyCRD() []byte { return clusterPropertyCRD }

// CRDs returns the CRDs every cluster gets: ServiceExport and ServiceImport from the
// sigs.k8s.io/mcs-api v0.5.2 module, and the KEP-2149 ClusterProperty.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, raw := range [][]byte{mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD, clusterPropertyCRD} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decode CRD: %w", err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// StartClusters starts the clusters in parallel and stops them when the test ends. Each has
// its own etcd, its own service CIDR (10.<96+i>.0.0/16) and an admin kubeconfig file.
func StartClusters(tb testing.TB, opts ClusterOptions) []*Cluster {
	tb.Helper()
	assets := K8sAssets(tb)
	if len(opts.Names) == 0 {
		opts.Names = []string{"cluster-0"}
	}
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if !opts.SkipCRDs {
		var err error
		if crds, err = CRDs(); err != nil {
			tb.Fatalf("harness: %v", err)
		}
	}
	clusters := make([]*Cluster, len(opts.Names))
	errs := make([]error, len(opts.Names))
	nodes := make([]*Node, len(opts.Names))
	var wg sync.WaitGroup
	for i, name := range opts.Names {
		ports := clusterPorts{apiServer: FreePort(tb), etcd: FreePort(tb), etcdPeer: FreePort(tb)}
		serviceCIDR := serviceCIDR(i)
		certDir := ""
		if opts.Nodes {
			nodes[i] = nodeFor(nodeNet.acquire(tb), name)
			nodes[i].Labels = opts.NodeLabels[name]
			certDir = nodeClusterCerts(tb, filepath.Join(opts.Dir, name+"-pki"), serviceCIDR)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = startCluster(name, serviceCIDR, assets, opts.Dir, crds, ports, certDir)
		}()
	}
	wg.Wait()
	tb.Cleanup(func() {
		// Side by side: a kube-apiserver takes about a second to stop.
		var stops sync.WaitGroup
		for _, c := range clusters {
			if c != nil {
				stops.Go(func() { _ = c.Stop() })
			}
		}
		stops.Wait()
	})
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("harness: start cluster %s: %v", opts.Names[i], err)
		}
	}
	if opts.Nodes {
		startWithNodes(tb, clusters, nodes)
	}
	return clusters
}

// serviceCIDR is the service range of the cluster at place i of StartClusters.
func serviceCIDR(i int) string { return fmt.Sprintf("10.%d.0.0/16", 96+i) }

// clusterPorts are the ports of one cluster's control plane.
type clusterPorts struct{ apiServer, etcd, etcdPeer int }

func startCluster(name, serviceCIDR, assets, dir string, crds []*apiextensionsv1.CustomResourceDefinition, ports clusterPorts, certDir string) (*Cluster, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
	}
	// Ports below the ephemeral range (FreePort): RestartAPIServer binds the same port
	// again, which an outgoing connection could otherwise have taken meanwhile.
	api := env.ControlPlane.GetAPIServer()
	api.Address, api.Port = "127.0.0.1", strconv.Itoa(ports.apiServer)
	api.Configure().Set("service-cluster-ip-range", serviceCIDR)
	// envtest gives a start 20 s; on 2 busy cores (node tests beside the integration tests)
	// a kube-apiserver took longer five times in a row. A slow start waits, it does not fail.
	api.StartTimeout = 90 * time.Second
	// Owner references with blockOwnerDeletion need the owner's finalizers subresource, as
	// on clusters that enforce it: the chart's RBAC must grant that.
	api.Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	if certDir != "" {
		// A cluster with nodes: kubelets and pods reach the apiserver on the node bridge,
		// through the kubernetes Service, with a serving certificate for those names, and
		// pods get ServiceAccount tokens.
		api.CertDir = certDir
		ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
		if err != nil {
			return nil, err
		}
		api.CA = ca
		api.Configure().Set("bind-address", "0.0.0.0")
		api.Configure().Set("advertise-address", HostIP)
		api.Configure().Set("disable-admission-plugins", "")
		api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
		api.Configure().Set("allow-privileged", "true")
	}
	if certDir == "" {
		// The cluster's files in its folder, so a run killed before its cleanup leaves
		// processes that name it (KillStale), and a new run starts clean.
		api.CertDir = filepath.Join(dir, name+"-apiserver")
		if err := os.RemoveAll(api.CertDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
			return nil, err
		}
	}
	etcd := &envtest.Etcd{DataDir: filepath.Join(dir, name+"-etcd"), StartTimeout: 90 * time.Second}
	if err := os.RemoveAll(etcd.DataDir); err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd = etcd
	etcd.URL = &url.URL{Scheme: "http", Host: Addr(ports.etcd)}
	etcd.Configure().Set("listen-peer-urls", "http://"+Addr(ports.etcdPeer))
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after the control plane is up (for example installing CRDs).
		_ = env.Stop()
		return nil, err
	}
	c := &Cluster{Name: name, Config: cfg, ServiceCIDR: serviceCIDR, env: env, apiPort: ports.apiServer, certDir: certDir}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1beta1.Install} {
		if err := add(scheme); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	user, err := env.AddUser(envtest.User{Name: "harness-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	c.Kubeconfig = filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}

// Stop stops the cluster's processes.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if c.env == nil {
		return nil
	}
	env := c.env
	c.env = nil
	return env.Stop()
}
