package discovery

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/api"
)

// Labels and annotations the discovery reads.
const (
	// LabelServiceName is the exported Service's name on imported slices (mcs mode).
	LabelServiceName = "multicluster.kubernetes.io/service-name"
	// LabelSourceCluster is the exporting cluster's id on imported slices (mcs mode).
	LabelSourceCluster = "multicluster.kubernetes.io/source-cluster"
	// LabelSourceRegion is the exporting cluster's region on imported slices (mcs mode).
	LabelSourceRegion = "multicluster.dynamo.nvidia.com/source-region"
	// LabelLocalityTier is the nearest locality tier of the exporting cluster, seen from
	// the importing one: cluster, region or any (mcs mode).
	LabelLocalityTier = "multicluster.dynamo.nvidia.com/locality-tier"
	// KarmadaWorkNamespaceAnnotation holds karmada-es-<cluster> on Karmada's imported slices.
	KarmadaWorkNamespaceAnnotation = "work.karmada.io/namespace"
	karmadaExecutionPrefix         = "karmada-es-"
	karmadaDerivedPrefix           = "derived-"
)

// Mode says whose imports the discovery reads.
type Mode string

const (
	// ModeMCS reads the EndpointSlices written by mcs-controller.
	ModeMCS Mode = "mcs"
	// ModeKarmada reads the EndpointSlices Karmada imports.
	ModeKarmada Mode = "karmada"
)

// DefaultPoolServiceSuffix ends every PoolRelay Service name: <dgd>-pool-relay.
const DefaultPoolServiceSuffix = "-pool-relay"

// Config says what to look for.
type Config struct {
	Mode Mode
	// RouterNamespace, RouterService and RouterPortName name the exported Global Router
	// Service and its TCP port that PoolRelays connect to. Required in mcs mode.
	RouterNamespace string
	RouterService   string
	RouterPortName  string
	// PoolServiceSuffix ends each pool's PoolRelay Service name; empty: DefaultPoolServiceSuffix.
	PoolServiceSuffix string
}

// Validate checks the configuration and names the missing or wrong setting.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeMCS, ModeKarmada:
	default:
		return fmt.Errorf("pool discovery %q: must be mcs or karmada", c.Mode)
	}
	if c.Mode == ModeMCS {
		for _, f := range []struct{ name, value string }{
			{"router namespace (--router-namespace)", c.RouterNamespace},
			{"router service (--router-service)", c.RouterService},
			{"router port name (--router-port-name)", c.RouterPortName},
		} {
			if f.value == "" {
				return fmt.Errorf("%s is required with pool discovery mcs", f.name)
			}
		}
	}
	return nil
}

func (c Config) suffix() string {
	if c.PoolServiceSuffix == "" {
		return DefaultPoolServiceSuffix
	}
	return c.PoolServiceSuffix
}

// Snapshot is the pools and routers found at one time.
type Snapshot struct {
	// Generation increases with every snapshot a Discovery builds; 0 for Build's result.
	Generation uint64
	Pools      []api.Pool
	Routers    []api.Router
	// Problems are configuration mismatches seen in the slices, for example a router port
	// name that no router slice has. The discovery logs each new one.
	Problems []string
}

// source returns the source cluster and Service name of a slice, or ok=false when the
// slice is not an import of this mode.
func (c Config) source(s *discoveryv1.EndpointSlice) (cluster, service string, ok bool) {
	switch c.Mode {
	case ModeKarmada:
		derived := s.Labels[discoveryv1.LabelServiceName]
		ns := s.Annotations[KarmadaWorkNamespaceAnnotation]
		if !strings.HasPrefix(derived, karmadaDerivedPrefix) || !strings.HasPrefix(ns, karmadaExecutionPrefix) {
			return "", "", false
		}
		cluster, service = strings.TrimPrefix(ns, karmadaExecutionPrefix), strings.TrimPrefix(derived, karmadaDerivedPrefix)
	default:
		cluster, service = s.Labels[LabelSourceCluster], s.Labels[LabelServiceName]
	}
	return cluster, service, cluster != "" && service != ""
}

// ready follows Kubernetes: an unset ready condition means ready.
func ready(e discoveryv1.Endpoint) bool { return e.Conditions.Ready == nil || *e.Conditions.Ready }

func replicaName(e discoveryv1.Endpoint) string {
	switch {
	case e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Name != "":
		return e.TargetRef.Name
	case e.Hostname != nil && *e.Hostname != "":
		return *e.Hostname
	default:
		return e.Addresses[0]
	}
}

func ports(s *discoveryv1.EndpointSlice) []api.Port {
	out := make([]api.Port, 0, len(s.Ports))
	for _, p := range s.Ports {
		ap := api.Port{Protocol: string(corev1.ProtocolTCP)}
		if p.Name != nil {
			ap.Name = *p.Name
		}
		if p.Protocol != nil {
			ap.Protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			ap.Port = *p.Port
		}
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Build computes the pools and routers from EndpointSlices. It is a pure function: the
// same slices give the same snapshot, in a stable order.
func Build(cfg Config, eps []*discoveryv1.EndpointSlice) Snapshot {
	suffix := cfg.suffix()
	pools := map[api.PoolKey]*api.Pool{}
	routers := map[string]api.Router{}
	routerSlices, routerSlicesWithPort := 0, 0
	for _, s := range eps {
		cluster, service, ok := cfg.source(s)
		if !ok {
			continue
		}
		if cfg.RouterService != "" && service == cfg.RouterService && s.Namespace == cfg.RouterNamespace {
			routerSlices++
			port, found := routerPort(s, cfg.RouterPortName)
			if !found {
				continue
			}
			routerSlicesWithPort++
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 0 || !ready(e) {
					continue
				}
				r := api.Router{ClusterID: cluster, Replica: replicaName(e), Address: e.Addresses[0]}
				r.ID = cluster + "/" + r.Replica
				r.URL = "http://" + net.JoinHostPort(r.Address, strconv.Itoa(int(port)))
				if _, dup := routers[r.ID]; !dup || r.URL < routers[r.ID].URL {
					routers[r.ID] = r
				}
			}
			continue
		}
		dgd, isPool := strings.CutSuffix(service, suffix)
		if !isPool || dgd == "" {
			continue
		}
		key := api.PoolKey{ClusterID: cluster, Namespace: s.Namespace, DGDName: dgd}
		p := pools[key]
		if p == nil {
			p = &api.Pool{Key: key, Service: service, Endpoints: []api.Endpoint{}}
			pools[key] = p
		}
		if cfg.Mode == ModeMCS {
			// Every slice of a source cluster carries the same; a pool takes the first set.
			if p.Region == "" {
				p.Region = s.Labels[LabelSourceRegion]
			}
			if p.Tier == "" {
				p.Tier = s.Labels[LabelLocalityTier]
			}
		}
		sp := ports(s)
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ep := api.Endpoint{Address: e.Addresses[0], Ready: ready(e), Ports: sp}
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				ep.TargetPod = e.TargetRef.Name
			}
			if e.Hostname != nil {
				ep.Hostname = *e.Hostname
			}
			if e.Zone != nil {
				ep.Zone = *e.Zone
			}
			p.Endpoints = append(p.Endpoints, ep)
		}
	}
	snap := Snapshot{Pools: []api.Pool{}, Routers: []api.Router{}}
	for _, p := range pools {
		if !slices.ContainsFunc(p.Endpoints, func(e api.Endpoint) bool { return e.Ready }) {
			continue // no Ready endpoint: not a pool
		}
		// By address; an address listed twice (a slice moving) is kept once, ready first.
		sort.Slice(p.Endpoints, func(i, j int) bool {
			a, b := p.Endpoints[i], p.Endpoints[j]
			if a.Address != b.Address {
				return a.Address < b.Address
			}
			if a.Ready != b.Ready {
				return a.Ready
			}
			return a.TargetPod < b.TargetPod
		})
		p.Endpoints = slices.CompactFunc(p.Endpoints, func(a, b api.Endpoint) bool { return a.Address == b.Address })
		snap.Pools = append(snap.Pools, *p)
	}
	sort.Slice(snap.Pools, func(i, j int) bool {
		a, b := snap.Pools[i].Key, snap.Pools[j].Key
		if a.ClusterID != b.ClusterID {
			return a.ClusterID < b.ClusterID
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.DGDName < b.DGDName
	})
	for _, r := range routers {
		snap.Routers = append(snap.Routers, r)
	}
	sort.Slice(snap.Routers, func(i, j int) bool { return snap.Routers[i].ID < snap.Routers[j].ID })
	if routerSlices > 0 && routerSlicesWithPort == 0 {
		snap.Problems = append(snap.Problems, fmt.Sprintf("router port name %q: no TCP port of that name in the %d EndpointSlices of %s/%s; no routers listed",
			cfg.RouterPortName, routerSlices, cfg.RouterNamespace, cfg.RouterService))
	}
	return snap
}

func routerPort(s *discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == name && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			return *p.Port, true
		}
	}
	return 0, false
}
