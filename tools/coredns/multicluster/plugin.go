package multicluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	labelServiceName   = "multicluster.kubernetes.io/service-name"
	labelSourceCluster = "multicluster.kubernetes.io/source-cluster"
	// inactiveZone is the zone mcs-controller hints the endpoints outside an import's
	// active locality tier for (its importer.InactiveZone): a zone no node has.
	inactiveZone = "multicluster.dynamo.nvidia.com-inactive"
)

var serviceImports = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}

func init() { plugin.Register("multicluster", setup) }

// Multicluster answers the clusterset zones from the cluster's ServiceImports.
type Multicluster struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	imports cache.SharedIndexInformer
	slices  cache.SharedIndexInformer
	stop    chan struct{}
	once    sync.Once

	// loaded reports whether both informers have synced (a func, so a unit test can say).
	loaded    func() bool
	discovery discovery.DiscoveryInterface
	servedMu  sync.Mutex
	served    bool
	servedAt  time.Time
}

func setup(c *caddy.Controller) error {
	m, kubeconfig, err := parse(c)
	if err != nil {
		return plugin.Error("multicluster", err)
	}
	cfg, err := clientConfig(kubeconfig)
	if err != nil {
		return plugin.Error("multicluster", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return plugin.Error("multicluster", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return plugin.Error("multicluster", err)
	}
	m.discovery = kube.Discovery()
	m.loaded = func() bool { return m.imports.HasSynced() && m.slices.HasSynced() }
	m.imports = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(serviceImports).Informer()
	m.slices = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labelServiceName
	})).Discovery().V1().EndpointSlices().Informer()
	if err := m.slices.AddIndexers(cache.Indexers{byImport: importIndex}); err != nil {
		return plugin.Error("multicluster", err)
	}
	m.stop = make(chan struct{})
	c.OnStartup(func() error {
		go m.imports.Run(m.stop)
		go m.slices.Run(m.stop)
		// Serve after the first sync, or after 5 s (then answers wait for Ready).
		deadline := time.Now().Add(5 * time.Second)
		for !m.synced() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	c.OnShutdown(func() error { m.once.Do(func() { close(m.stop) }); return nil })
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		m.Next = next
		return m
	})
	return nil
}

func parse(c *caddy.Controller) (*Multicluster, string, error) {
	m := &Multicluster{}
	kubeconfig := ""
	for c.Next() {
		m.Zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
		for c.NextBlock() {
			switch c.Val() {
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) == 0 {
					return nil, "", c.ArgErr()
				}
				kubeconfig = args[0]
			case "fallthrough":
				m.Fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return nil, "", c.Errf("unknown property %q", c.Val())
			}
		}
	}
	return m, kubeconfig, nil
}

func clientConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// Name implements plugin.Handler.
func (m *Multicluster) Name() string { return "multicluster" }

// synced reports whether the first List of both watches is in.
func (m *Multicluster) synced() bool { return m.loaded() }

// Ready implements the ready plugin's Readiness: CoreDNS reports ready only once the
// ServiceImports and EndpointSlices are loaded, so a restarted or new CoreDNS takes no
// traffic before it can answer clusterset.local (it would answer SERVFAIL, and a plugin
// that answered NXDOMAIN would make clients cache the name's absence). A cluster whose
// ServiceImport API does not exist yet (the CRD comes with the MCS chart) has nothing to
// load: CoreDNS is ready, so cluster.local works, and clusterset.local answers SERVFAIL
// until the CRD exists and is loaded.
func (m *Multicluster) Ready() bool {
	if m.synced() {
		return true
	}
	return !m.importsServed()
}

// importsServed reports whether the API server serves ServiceImports, asking at most every
// 2 s (the ready plugin asks on every probe).
func (m *Multicluster) importsServed() bool {
	m.servedMu.Lock()
	defer m.servedMu.Unlock()
	if time.Since(m.servedAt) < 2*time.Second {
		return m.served
	}
	m.servedAt = time.Now()
	res, err := m.discovery.ServerResourcesForGroupVersion(serviceImports.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		m.served = false
	case err != nil:
		m.served = true // unknown: not ready, as the kubernetes plugin while its API is away
	default:
		m.served = false
		for _, r := range res.APIResources {
			if r.Name == serviceImports.Resource {
				m.served = true
			}
		}
	}
	return m.served
}

// ServeDNS implements plugin.Handler.
func (m *Multicluster) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	zone := plugin.Zones(m.Zones).Matches(qname)
	if zone == "" {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	if !m.synced() {
		return dns.RcodeServerFailure, fmt.Errorf("multicluster: the ServiceImport and EndpointSlice watches have not synced")
	}
	res := Answer(m.find, strings.ToLower(zone), strings.ToLower(qname), state.QType())
	if !res.Found && m.Fall.Through(qname) {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	msg := new(dns.Msg)
	msg.SetReply(r)
	msg.Authoritative = true
	msg.Answer = res.Records
	msg.Extra = res.Extra
	if !res.Found {
		msg.Rcode = dns.RcodeNameError
	}
	if len(msg.Answer) == 0 {
		msg.Ns = []dns.RR{soa(zone)}
	}
	if err := w.WriteMsg(msg); err != nil {
		return dns.RcodeServerFailure, err
	}
	return dns.RcodeSuccess, nil
}

func soa(zone string) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns.dns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: ttl}
}

// find returns the import namespace/name with its ready endpoints, from the informers'
// caches: one ServiceImport and its slices (by index), never a scan.
func (m *Multicluster) find(namespace, name string) *Import {
	o, ok, err := m.imports.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	imp := importFrom(u)
	slices, _ := m.slices.GetIndexer().ByIndex(byImport, namespace+"/"+name)
	for _, o := range slices {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		imp.Endpoints = append(imp.Endpoints, endpointsOf(s)...)
	}
	return imp
}

// endpointsOf returns the ready endpoints of one imported slice, each marked inactive when
// mcs-controller hints it out of the import's active locality tier.
func endpointsOf(s *discoveryv1.EndpointSlice) []Endpoint {
	var ports []Port
	for _, p := range s.Ports {
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			continue // not a port number: no record can name it
		}
		port := Port{Protocol: "TCP", Port: *p.Port}
		if p.Name != nil {
			port.Name = *p.Name
		}
		if p.Protocol != nil {
			port.Protocol = string(*p.Protocol)
		}
		ports = append(ports, port)
	}
	var out []Endpoint
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		host := ""
		if e.Hostname != nil {
			host = *e.Hostname
		}
		inactive := e.Hints != nil && len(e.Hints.ForZones) == 1 && e.Hints.ForZones[0].Name == inactiveZone
		for _, a := range e.Addresses {
			out = append(out, Endpoint{ClusterID: s.Labels[labelSourceCluster], Hostname: host, Address: a, Ports: ports, Inactive: inactive})
		}
	}
	return out
}

// byImport indexes EndpointSlices by the namespace/name of their import.
const byImport = "import"

func importIndex(o any) ([]string, error) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[labelServiceName]}, nil
}

// importFrom reads the fields the records need from a ServiceImport.
func importFrom(u *unstructured.Unstructured) *Import {
	imp := &Import{Namespace: u.GetNamespace(), Name: u.GetName()}
	t, _, _ := unstructured.NestedString(u.Object, "spec", "type")
	imp.Headless = t == "Headless"
	imp.IPs, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "ips")
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	for _, p := range ports {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		port := Port{Protocol: "TCP"}
		if v, ok := pm["name"].(string); ok {
			port.Name = v
		}
		if v, ok := pm["protocol"].(string); ok {
			port.Protocol = v
		}
		var n float64
		switch v := pm["port"].(type) {
		case int64:
			n = float64(v)
		case float64:
			n = v
		}
		if n < 1 || n > 65535 || n != float64(int32(n)) {
			continue // not a port number: no record can name it
		}
		port.Port = int32(n)
		imp.Ports = append(imp.Ports, port)
	}
	return imp
}
