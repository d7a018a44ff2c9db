package importer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery"
)

// registryAccepted reports whether the registry can send imp: its spec, read as the
// winning export's spec with the merged ports, meets the export contract (the merge keeps
// the union so: registry/merge's tests), and so do every cluster's endpoints.
func registryAccepted(imp *registryv1.ServiceImport) bool {
	s := imp.GetSpec()
	spec := &registryv1.ExportSpec{
		Ports: s.GetPorts(), Type: s.GetType(), SessionAffinity: s.GetSessionAffinity(), SessionAffinityConfig: s.GetSessionAffinityConfig(),
		IpFamilies: s.GetIpFamilies(), InternalTrafficPolicy: s.GetInternalTrafficPolicy(), TrafficDistribution: s.GetTrafficDistribution(),
		ExportedLabels: s.GetLabels(), ExportedAnnotations: s.GetAnnotations(),
	}
	var errs validate.Errors
	validate.ExportSpec(&errs, "spec", spec)
	seen := map[string]bool{}
	for _, c := range imp.GetClusters() {
		validate.DNSLabel(&errs, "cluster_id", c.GetClusterId())
		if seen[c.GetClusterId()] {
			return false
		}
		seen[c.GetClusterId()] = true
		validate.EndpointGroups(&errs, "endpoint_groups", c.GetEndpointGroups())
	}
	return errs.Len() == 0
}

// readAll runs every reader of an import over it: the importer's desired objects, checked
// against what the registry decided, and the Global Discovery Service's discovery over the
// slices. It must not panic for any import the registry accepts.
func readAll(t *testing.T, imp *registryv1.ServiceImport) Desired {
	t.Helper()
	d := DesiredFor(imp)
	// What the importer adds, as the first source cluster would write it into itself: the
	// locality hints and the source labels.
	self, region := "", ""
	if cs := imp.GetClusters(); len(cs) > 0 {
		self, region = cs[0].GetClusterId(), cs[0].GetRegion()
	}
	zones := []string{"us-east-1a", "us-east-1b"}
	d.Localize(imp, []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION},
		self, region, Topology{Zones: zones})
	if n := len(d.Service.Spec.Ports); n > 1 {
		for _, p := range d.Service.Spec.Ports {
			if p.Name == "" {
				t.Fatalf("derived Service with %d ports has an unnamed one", n)
			}
		}
	}
	excluded := map[string]map[string]bool{}
	for _, c := range imp.GetClusters() {
		excluded[c.GetClusterId()] = map[string]bool{}
		for _, p := range c.GetExcludedPorts() {
			excluded[c.GetClusterId()][p.GetName()] = true
		}
	}
	for _, s := range d.Slices {
		for _, p := range s.Ports {
			if excluded[s.Labels[mcsv1beta1.LabelSourceCluster]][*p.Name] {
				t.Fatalf("slice %s carries port %q the registry excluded for its cluster", s.Name, *p.Name)
			}
		}
	}
	for _, mode := range []discovery.Config{
		{Mode: discovery.ModeMCS, RouterNamespace: imp.GetService().GetNamespace(), RouterService: imp.GetService().GetName(), RouterPortName: "http"},
		{Mode: discovery.ModeMCS, RouterNamespace: "other", RouterService: "router", RouterPortName: "http", PoolServiceSuffix: imp.GetService().GetName()[1:]},
	} {
		_ = discovery.Build(mode, d.Slices)
	}
	return d
}

// issueRows are the exports one cluster could once store that broke every cluster's import
// of the Service; each is now refused by the registry or imported without harm.
func issueRows() map[string]*registryv1.ServiceImport {
	row := func(mutate func(imp *registryv1.ServiceImport)) *registryv1.ServiceImport {
		imp := routerImport("good", "bad")
		mutate(imp)
		return imp
	}
	bad := func(imp *registryv1.ServiceImport) *registryv1.EndpointGroup {
		return imp.Clusters[1].EndpointGroups[0]
	}
	addr := func(a string) func(*registryv1.ServiceImport) {
		return func(imp *registryv1.ServiceImport) { bad(imp).Endpoints[0].Addresses = []string{a} }
	}
	return map[string]*registryv1.ServiceImport{
		"endpoint without conditions": row(func(imp *registryv1.ServiceImport) { bad(imp).Endpoints[0].Conditions = nil }),
		"unnamed port beside a named one": row(func(imp *registryv1.ServiceImport) {
			imp.Spec.Ports = append(imp.Spec.Ports, &registryv1.ServicePort{Port: 81, Protocol: "TCP"})
		}),
		"appProtocol not a qualified name": row(func(imp *registryv1.ServiceImport) { imp.Spec.Ports[0].AppProtocol = "Grpc Over TLS!" }),
		"appProtocol of 256 characters":    row(func(imp *registryv1.ServiceImport) { imp.Spec.Ports[0].AppProtocol = strings.Repeat("a", 256) }),
		"single-label FQDN": row(func(imp *registryv1.ServiceImport) {
			bad(imp).AddressType = "FQDN"
			bad(imp).Endpoints[0].Addresses = []string{"backend"}
		}),
		"non-canonical IPv6": row(func(imp *registryv1.ServiceImport) {
			bad(imp).AddressType = "IPv6"
			bad(imp).Endpoints[0].Addresses = []string{"FD00:0:0:0:0:0:0:1"}
		}),
		"IPv4-mapped IPv6": row(func(imp *registryv1.ServiceImport) {
			bad(imp).AddressType = "IPv6"
			bad(imp).Endpoints[0].Addresses = []string{"::ffff:10.0.0.1"}
		}),
		"loopback":             row(addr("127.0.0.1")),
		"metadata service":     row(addr("169.254.169.254")),
		"unspecified":          row(addr("0.0.0.0")),
		"link-local multicast": row(addr("224.0.0.1")),
		"two endpoint ports named empty": row(func(imp *registryv1.ServiceImport) {
			bad(imp).Ports = []*registryv1.EndpointPort{{Port: 80, Protocol: "TCP"}, {Port: 81, Protocol: "TCP"}}
		}),
		"endpoint port without protocol": row(func(imp *registryv1.ServiceImport) { bad(imp).Ports[0].Protocol = "" }),
		"endpoint port with a bad appProtocol": row(func(imp *registryv1.ServiceImport) {
			bad(imp).Ports[0].AppProtocol = "Grpc Over TLS!"
		}),
		"annotations of exactly 256 KiB": row(func(imp *registryv1.ServiceImport) {
			imp.Spec.Annotations = map[string]string{"example.com/a": strings.Repeat("v", 256*1024-len("example.com/a"))}
		}),
		"annotations at the contract's limit": row(func(imp *registryv1.ServiceImport) {
			imp.Spec.Annotations = map[string]string{"example.com/a": strings.Repeat("v", validate.MaxAnnotationBytes-len("example.com/a"))}
		}),
		"port excluded for the bad cluster": row(func(imp *registryv1.ServiceImport) {
			imp.Clusters[1].ExcludedPorts = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 8081}}
		}),
	}
}

// FuzzDesiredFromAccepted: every import the registry can send, seeded with the rows that
// once broke every cluster, is read by the importer and the discovery without a panic,
// and never carries an excluded port or an invalid port list.
func FuzzDesiredFromAccepted(f *testing.F) {
	for _, imp := range issueRows() {
		b, _ := proto.Marshal(imp)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		imp := &registryv1.ServiceImport{}
		if proto.Unmarshal(b, imp) != nil {
			return
		}
		imp.Service = &registryv1.ServiceKey{Namespace: "dynamo", Name: "router"} // keys are checked on their own
		if !registryAccepted(imp) {
			return
		}
		readAll(t, imp)
	})
}

// TestDesiredPassesTheAPIServer is the export contract's proof: imports made of random
// registry-accepted exports (and the rows that once broke every cluster) become objects a
// real kube-apiserver accepts, by a server-side dry-run create of each; what the registry
// refuses is refused for the field the row is about.
func TestDesiredPassesTheAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	try := func(name string, imp *registryv1.ServiceImport) {
		t.Helper()
		ns := imp.GetService().GetNamespace()
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		d := readAll(t, imp)
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: imp.GetService().GetName(), Labels: d.Labels, Annotations: d.Annotations}, Spec: d.Spec}
		objs := []client.Object{si, d.Service}
		for _, s := range d.Slices {
			objs = append(objs, s)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o, client.DryRunAll); err != nil {
				t.Errorf("%s: the API server refuses %T %s: %v\nimport: %v", name, o, o.GetName(), err, imp)
				return
			}
		}
	}
	rejected := 0
	for name, imp := range issueRows() {
		if !registryAccepted(imp) {
			rejected++
			continue
		}
		try(name, imp)
	}
	if rejected < 10 {
		t.Errorf("the registry refuses %d of the %d rows, want the invalid ones (at least 10)", rejected, len(issueRows()))
	}
	rng := rand.New(rand.NewPCG(1645, uint64(len(t.Name()))))
	accepted := 0
	for i := range 300 {
		imp := randomImport(rng, i)
		if !registryAccepted(imp) {
			continue
		}
		accepted++
		try(fmt.Sprintf("random import %d", i), imp)
	}
	if accepted < 250 {
		t.Fatalf("only %d of 300 random imports are registry-accepted: the generator no longer explores the contract", accepted)
	}
}

// startAPIServer starts a kube-apiserver and etcd (bin/k8s from `make tools`, or
// KUBEBUILDER_ASSETS) with the chart's CRDs, and returns a client.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		if testing.Short() {
			t.Skip("-short: no kube-apiserver (run `make tools`)")
		}
		t.Fatalf("%s/kube-apiserver is missing; run `make tools` first (or set KUBEBUILDER_ASSETS)", assets)
	}
	logf.SetLogger(logr.Discard()) // envtest's own messages are not this test's
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join(root, "charts", "global-discovery-mcs", "files", "crds")},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = mcsv1beta1.Install(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above %s", dir)
		}
		dir = parent
	}
}

// randomImport is an import made of random values of every field the importer copies, each
// drawn from values the contract accepts, at its edges (names of 63 characters, the most
// annotation bytes, IPv6, FQDN, no conditions, excluded ports, empty groups).
func randomImport(rng *rand.Rand, i int) *registryv1.ServiceImport {
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	label := func(n int) string {
		const chars = "abcdefghijklmnopqrstuvwxyz0123456789-"
		b := make([]byte, 1+rng.IntN(n))
		for j := range b {
			b[j] = chars[rng.IntN(len(chars))]
		}
		b[0], b[len(b)-1] = 'a'+byte(rng.IntN(26)), '0'+byte(rng.IntN(10))
		return string(b)
	}
	name := "s" + label(62)
	imp := &registryv1.ServiceImport{
		Service: &registryv1.ServiceKey{Namespace: "ns" + fmt.Sprint(i%7), Name: name},
		Spec: &registryv1.ImportSpec{
			Type:            registryv1.ServiceType(1 + rng.IntN(2)),
			SessionAffinity: pick("", "None", "ClientIP"),
		},
	}
	s := imp.Spec
	if s.SessionAffinity == "ClientIP" && rng.IntN(2) == 0 {
		s.SessionAffinityConfig = &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: int32(1 + rng.IntN(86400))}
	}
	s.IpFamilies = [][]string{nil, {"IPv4"}, {"IPv6"}, {"IPv4", "IPv6"}}[rng.IntN(4)]
	s.InternalTrafficPolicy = pick("", "Cluster", "Local")
	s.TrafficDistribution = pick("", "PreferClose", "PreferSameZone", "PreferSameNode")
	nPorts := 1 + rng.IntN(5)
	if rng.IntN(10) == 0 {
		nPorts = validate.MaxPorts
	}
	for j := range nPorts {
		p := &registryv1.ServicePort{Name: label(63), Protocol: pick("", "TCP", "UDP", "SCTP"), Port: int32(1 + j*1000 + rng.IntN(1000))}
		if nPorts == 1 && rng.IntN(3) == 0 {
			p.Name = ""
		}
		p.AppProtocol = pick("", "http", "kubernetes.io/h2c", "example.com/my-Proto.v2", strings.Repeat("a", 63))
		s.Ports = append(s.Ports, p)
	}
	s.Labels, s.Annotations = map[string]string{}, map[string]string{}
	for range rng.IntN(5) {
		s.Labels[pick("", "example.com/", "a.b.c/")+label(63)] = pick("", "v", label(63))
	}
	switch rng.IntN(4) {
	case 0:
		s.Annotations["example.com/big"] = strings.Repeat("x", validate.MaxAnnotationBytes-len("example.com/big"))
	case 1:
		s.Annotations["Example.com/MixedCase"] = "any text: with spaces, quotes \" and unicode ✓"
	}
	for ci := range 1 + rng.IntN(3) {
		c := &registryv1.ImportCluster{ClusterId: fmt.Sprintf("c%d-", ci) + label(59)}
		for gi := range rng.IntN(3) {
			g := &registryv1.EndpointGroup{AddressType: pick("IPv4", "IPv6", "FQDN")}
			for pi, sp := range s.Ports {
				if rng.IntN(4) == 0 {
					continue
				}
				ep := &registryv1.EndpointPort{Name: sp.GetName(), Protocol: pick("", sp.GetProtocol()), Port: int32(1 + rng.IntN(65535)), AppProtocol: pick("", sp.GetAppProtocol())}
				if pi > 0 && ep.Name == "" {
					continue
				}
				g.Ports = append(g.Ports, ep)
			}
			for e := range rng.IntN(150) {
				ep := &registryv1.Endpoint{Hostname: pick("", label(63)), Zone: pick("", "us-east-1a"), TargetPod: pick("", "pod-"+label(40))}
				if rng.IntN(3) > 0 {
					ep.Conditions = &registryv1.EndpointConditions{Ready: pickBool(rng), Serving: pickBool(rng), Terminating: pickBool(rng)}
				}
				for a := range 1 + rng.IntN(3) {
					switch g.AddressType {
					case "IPv4":
						ep.Addresses = append(ep.Addresses, fmt.Sprintf("%d.%d.%d.%d", 1+rng.IntN(126), gi, e%250, 1+a))
					case "IPv6":
						ep.Addresses = append(ep.Addresses, netip.AddrFrom16([16]byte{0: 0xfd, 3: byte(gi), 12: byte(e >> 8), 13: byte(e), 15: byte(1 + a)}).String())
					default:
						ep.Addresses = append(ep.Addresses, label(63)+"."+label(63)+pick("", ".example.com", ".example.com."))
					}
				}
				g.Endpoints = append(g.Endpoints, ep)
			}
			c.EndpointGroups = append(c.EndpointGroups, g)
		}
		if ci > 0 && len(s.Ports) > 0 && rng.IntN(2) == 0 {
			c.ExcludedPorts = []*registryv1.ServicePort{{Name: s.Ports[0].GetName(), Port: s.Ports[0].GetPort() + 1}}
		}
		imp.Clusters = append(imp.Clusters, c)
	}
	return imp
}

func pickBool(rng *rand.Rand) *bool {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return ptr.To(true)
	}
	return ptr.To(false)
}
