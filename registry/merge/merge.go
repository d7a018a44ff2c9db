// Package merge computes ServiceImports from exports: one pure, deterministic function of
// the stored facts and the current time, the same in every registry replica (KEP-1645).
package merge

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/validate"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// DefaultClientIPTimeoutSeconds is Kubernetes' default ClientIP affinity timeout, used to
// compare an export that leaves it unset with one that sets it.
const DefaultClientIPTimeoutSeconds = 10800

// Participant is a cluster whose exports take part in imports.
type Participant struct {
	// Region is the region the cluster registered with; the import names it for the
	// importers' region tier.
	Region string
	// HeldRegion, when set, is the region whose lagging replication holds the cluster's
	// expired lease (LEASE_STATE_HELD_REPLICATION); the import says so.
	HeldRegion string
}

// Service merges every export of one Service. Exports of clusters that are not in
// participants (not registered, or whose lease expired) do not participate. It returns nil when no export
// participates: the Service then has no ServiceImport. The returned import holds every
// participating cluster's endpoint groups (shared with the exports, not copied).
//
// Rules (KEP-1645): the oldest export wins (earliest CreateTime, ties broken by cluster id)
// and its spec is imported; ports are the union, merged by name, then by (protocol, port);
// every disagreement is a conflict reported for every participating export.
func Service(svc store.ServiceKey, exports []store.Export, participants map[string]Participant) *registryv1.ServiceImport {
	parts := make([]store.Export, 0, len(exports))
	for _, e := range exports {
		if _, ok := participants[e.ClusterID]; ok {
			parts = append(parts, e)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	// Oldest first; the same order in every replica.
	sort.Slice(parts, func(i, j int) bool {
		if !parts[i].CreateTime.Equal(parts[j].CreateTime) {
			return parts[i].CreateTime.Before(parts[j].CreateTime)
		}
		return parts[i].ClusterID < parts[j].ClusterID
	})
	winner := parts[0].Spec
	conflicts := map[registryv1.ConflictReason]bool{}
	ports, excluded := mergePorts(parts, conflicts)
	for _, e := range parts[1:] {
		s := e.Spec
		if s.GetType() != winner.GetType() {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT] = true
		}
		if affinity(s) != affinity(winner) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFLICT] = true
		} else if affinity(s) == "ClientIP" && clientIPTimeout(s) != clientIPTimeout(winner) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_SESSION_AFFINITY_CONFIG_CONFLICT] = true
		}
		if !maps.Equal(s.GetExportedLabels(), winner.GetExportedLabels()) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_LABELS_CONFLICT] = true
		}
		if !maps.Equal(s.GetExportedAnnotations(), winner.GetExportedAnnotations()) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_ANNOTATIONS_CONFLICT] = true
		}
		if trafficPolicy(s) != trafficPolicy(winner) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT] = true
		}
		if s.GetTrafficDistribution() != winner.GetTrafficDistribution() {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_TRAFFIC_DISTRIBUTION_CONFLICT] = true
		}
		if !sameSet(s.GetIpFamilies(), winner.GetIpFamilies()) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_IP_FAMILY_CONFLICT] = true
		}
		if !slices.Equal(s.GetLocality(), winner.GetLocality()) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_LOCALITY_CONFLICT] = true
		}
	}
	reasons := make([]registryv1.ConflictReason, 0, len(conflicts))
	for r := range conflicts {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)

	imp := &registryv1.ServiceImport{
		Service: &registryv1.ServiceKey{Namespace: svc.Namespace, Name: svc.Name},
		Spec: &registryv1.ImportSpec{
			Ports:                 ports,
			Type:                  winner.GetType(),
			SessionAffinity:       affinity(winner),
			SessionAffinityConfig: affinityConfig(winner),
			IpFamilies:            slices.Clone(winner.GetIpFamilies()),
			InternalTrafficPolicy: winner.GetInternalTrafficPolicy(),
			TrafficDistribution:   winner.GetTrafficDistribution(),
			Labels:                maps.Clone(winner.GetExportedLabels()),
			Annotations:           maps.Clone(winner.GetExportedAnnotations()),
			Locality:              slices.Clone(winner.GetLocality()),
		},
		WinningClusterId: parts[0].ClusterID,
		Conflicts:        reasons,
	}
	byID := slices.Clone(parts)
	sort.Slice(byID, func(i, j int) bool { return byID[i].ClusterID < byID[j].ClusterID })
	for _, e := range byID {
		var held registryv1.LeaseState
		if r := participants[e.ClusterID].HeldRegion; r != "" {
			held = registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION
		}
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{
			LeaseState:       held,
			HeldRegion:       participants[e.ClusterID].HeldRegion,
			ClusterId:        e.ClusterID,
			Region:           participants[e.ClusterID].Region,
			ExportCreateTime: timestamppb.New(e.CreateTime),
			ExportUpdateTime: timestamppb.New(e.UpdateTime),
			Conflicts:        slices.Clone(reasons),
			EndpointGroups:   e.EndpointGroups,
			MissingPorts:     missingPorts(ports, e.Spec.GetPorts()),
			ExcludedPorts:    excluded[e.ClusterID],
		})
	}
	return imp
}

// Verdict is the registry's verdict on clusterID's export, given the Service's import
// (nil when none participates).
func Verdict(imp *registryv1.ServiceImport, clusterID string) *registryv1.ExportVerdict {
	v := &registryv1.ExportVerdict{}
	if imp == nil {
		return v
	}
	v.WinningClusterId = imp.GetWinningClusterId()
	for _, c := range imp.GetClusters() {
		if c.GetClusterId() == clusterID {
			v.Participating = true
			v.Conflicts = slices.Clone(c.GetConflicts())
			v.MissingPorts = c.GetMissingPorts()
			v.ExcludedPorts = c.GetExcludedPorts()
		}
	}
	return v
}

// mergePorts returns the union of the ports, oldest export first: a port whose name is
// taken by a different port, or whose (protocol, port) is taken under another name, is
// left out; so is a port that would make the union an invalid Service (see joins). The exports' port sets must be identical (mcs-api v1beta1: PortConflict "if
// the ports are not identical in all the constituent Services"); any difference is a
// PortConflict, while the import keeps the union (KEP-1645). It also returns, by cluster,
// the ports left out.
func mergePorts(parts []store.Export, conflicts map[registryv1.ConflictReason]bool) ([]*registryv1.ServicePort, map[string][]*registryv1.ServicePort) {
	type protoPort struct {
		protocol string
		port     int32
	}
	var first map[string]bool
	for _, e := range parts[1:] {
		if samePortsInOrder(parts[0].Spec.GetPorts(), e.Spec.GetPorts()) {
			continue // the usual case, told without building sets
		}
		if first == nil {
			first = PortSet(parts[0].Spec.GetPorts())
		}
		if !maps.Equal(first, PortSet(e.Spec.GetPorts())) {
			conflicts[registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT] = true
			break
		}
	}
	var out []*registryv1.ServicePort
	excluded := map[string][]*registryv1.ServicePort{}
	byName := map[string]*registryv1.ServicePort{}
	byNumber := map[protoPort]*registryv1.ServicePort{}
	for _, e := range parts {
		for _, p := range e.Spec.GetPorts() {
			np := protoPort{protocol(p.GetProtocol()), p.GetPort()}
			if q, ok := byName[p.GetName()]; ok {
				if protocol(q.GetProtocol()) != np.protocol || q.GetPort() != np.port || q.GetAppProtocol() != p.GetAppProtocol() {
					conflicts[registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT] = true
					excluded[e.ClusterID] = append(excluded[e.ClusterID], p)
				}
				continue
			}
			if _, ok := byNumber[np]; ok {
				conflicts[registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT] = true
				excluded[e.ClusterID] = append(excluded[e.ClusterID], p)
				continue
			}
			if !joins(out, p) {
				conflicts[registryv1.ConflictReason_CONFLICT_REASON_PORT_CONFLICT] = true
				excluded[e.ClusterID] = append(excluded[e.ClusterID], p)
				continue
			}
			c := &registryv1.ServicePort{Name: p.GetName(), Protocol: np.protocol, AppProtocol: p.GetAppProtocol(), Port: p.GetPort()}
			byName[c.Name] = c
			byNumber[np] = c
			out = append(out, c)
		}
	}
	return out, excluded
}

// joins reports whether port p, whose name and number no port of union has, can join the
// union as the derived Service's port: Kubernetes requires every port of a Service with
// several ports to be named, so an unnamed port joins only an empty union and a union
// holding an unnamed port takes no other; the union holds at most validate.MaxPorts; and
// the port itself meets the export contract (an item stored under older rules may not),
// so no export can make the derived Service of the others invalid.
func joins(union []*registryv1.ServicePort, p *registryv1.ServicePort) bool {
	switch {
	case len(union) >= validate.MaxPorts:
		return false
	case len(union) > 0 && (p.GetName() == "" || union[0].GetName() == ""):
		return false
	}
	var errs validate.Errors
	validate.ServicePort(&errs, "port", p)
	return errs.Len() == 0
}

// missingPorts returns the ports of the union that an export's ports lack.
func missingPorts(union, ports []*registryv1.ServicePort) []*registryv1.ServicePort {
	if samePortsInOrder(union, ports) {
		return nil
	}
	have := PortSet(ports)
	var out []*registryv1.ServicePort
	for _, p := range union {
		if !have[PortString(p)] {
			out = append(out, p)
		}
	}
	return out
}

// samePortsInOrder: the same ports in the same order, as PortSet compares them.
func samePortsInOrder(a, b []*registryv1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.GetName() != y.GetName() || protocol(x.GetProtocol()) != protocol(y.GetProtocol()) || x.GetPort() != y.GetPort() || x.GetAppProtocol() != y.GetAppProtocol() {
			return false
		}
	}
	return true
}

// PortSet is a set of ports in a form that compares equal when the ports are the same:
// "name/protocol/port/appProtocol", with an empty protocol as TCP.
func PortSet(ports []*registryv1.ServicePort) map[string]bool {
	out := make(map[string]bool, len(ports))
	for _, p := range ports {
		out[PortString(p)] = true
	}
	return out
}

// PortString names one port as PortSet does.
func PortString(p *registryv1.ServicePort) string {
	s := fmt.Sprintf("%s/%s/%d", p.GetName(), protocol(p.GetProtocol()), p.GetPort())
	if p.GetAppProtocol() != "" {
		s += "/" + p.GetAppProtocol()
	}
	return s
}

func protocol(p string) string {
	if p == "" {
		return "TCP"
	}
	return p
}

func affinity(s *registryv1.ExportSpec) string {
	if s.GetSessionAffinity() == "" {
		return "None"
	}
	return s.GetSessionAffinity()
}

func clientIPTimeout(s *registryv1.ExportSpec) int32 {
	if t := s.GetSessionAffinityConfig().GetClientIpTimeoutSeconds(); t != 0 {
		return t
	}
	return DefaultClientIPTimeoutSeconds
}

func affinityConfig(s *registryv1.ExportSpec) *registryv1.SessionAffinityConfig {
	if affinity(s) != "ClientIP" {
		return nil
	}
	return &registryv1.SessionAffinityConfig{ClientIpTimeoutSeconds: clientIPTimeout(s)}
}

func trafficPolicy(s *registryv1.ExportSpec) string {
	if s.GetInternalTrafficPolicy() == "" {
		return "Cluster"
	}
	return s.GetInternalTrafficPolicy()
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
