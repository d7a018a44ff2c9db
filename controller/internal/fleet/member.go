package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/exporter"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// member is one simulated cluster: the controller's own pool, session and import watch,
// with its exports held in memory where a controller reads them from its kube-apiserver.
type member struct {
	idx     int
	id      string
	fleet   *Fleet
	pool    *registryclient.Pool
	session *registryclient.Session
	watch   *registryclient.ImportWatch

	// newEpoch is when the watch last received a snapshot of a new epoch (UnixNano).
	newEpoch atomic.Int64

	mu      sync.Mutex
	exports []*registryv1.ExportContent
	// complete: the Services whose import holds every cluster of the fleet; completeN
	// counts them.
	complete  map[types.NamespacedName]bool
	completeN atomic.Int32
}

// Registered sends the cluster's exports after a registration and every VerifyEvery
// renewals, as the export reconciler does: nothing when the registry holds them already.
func (m *member) Registered(ctx context.Context, _ int64) error {
	m.mu.Lock()
	want := slices.Clone(m.exports)
	m.mu.Unlock()
	_, same, err := exporter.RegistryHolds(ctx, m.pool, m.watch, m.fleet.cfg.Clusterset, m.id, want)
	m.fleet.stats.count(&m.fleet.stats.verifies, &m.fleet.stats.verifyErrors, err)
	if err == nil && same {
		return nil
	}
	err = m.pool.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		_, err := c.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: m.fleet.cfg.Clusterset, ClusterId: m.id, Exports: want})
		return err
	})
	m.fleet.stats.count(&m.fleet.stats.syncs, &m.fleet.stats.syncErrors, err)
	if err != nil {
		return fmt.Errorf("sync %d exports: %w", len(want), err)
	}
	return nil
}

// StateChanged is the session's news; the simulated cluster has no conditions to set.
func (*member) StateChanged(context.Context) {}

// ImportsChanged follows the cluster's view: the Services whose import became complete,
// and the readiness flips it now shows.
func (m *member) ImportsChanged(_ context.Context, keys []types.NamespacedName) {
	n := m.fleet.cfg.Clusters
	m.mu.Lock()
	for _, k := range keys {
		was := m.complete[k]
		now := len(m.watch.Get(k).GetClusters()) == n
		if was != now {
			m.complete[k] = now
			if now {
				m.completeN.Add(1)
			} else {
				m.completeN.Add(-1)
			}
			m.fleet.completed(now)
		}
	}
	m.mu.Unlock()
	m.fleet.flips.observe(m, keys)
}

// setReady sets the readiness of the first endpoint of the cluster's export of Service s
// and sends the export with PutExport, as the export reconciler sends a changed
// EndpointSlice.
func (m *member) setReady(ctx context.Context, s int, ready bool) error {
	m.mu.Lock()
	next := proto.CloneOf(m.exports[s])
	ep := next.GetEndpointGroups()[0].GetEndpoints()[0]
	ep.Conditions.Ready = proto.Bool(ready)
	ep.Conditions.Serving = proto.Bool(ready)
	m.exports[s] = next
	m.mu.Unlock()
	err := m.pool.Call(ctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		_, err := c.PutExport(ctx, &registryv1.PutExportRequest{
			Clusterset: m.fleet.cfg.Clusterset, ClusterId: m.id, Service: next.GetService(), Spec: next.GetSpec(), EndpointGroups: next.GetEndpointGroups(),
		})
		return err
	})
	if status.Code(err) == codes.FailedPrecondition {
		m.session.Lost() // registers again and syncs, as the controller does
	}
	return err
}

// ready reports the readiness of the first endpoint of the cluster's export of Service s.
func (m *member) ready(s int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exports[s].GetEndpointGroups()[0].GetEndpoints()[0].GetConditions().GetReady()
}

// has reports whether the cluster's view of Service k holds src's part.
func (m *member) has(k types.NamespacedName, src string) bool {
	_, ok := m.part(k, src)
	return ok
}

// shows reports whether the cluster's view has cluster src's first endpoint of Service k
// with readiness ready.
func (m *member) shows(k types.NamespacedName, src string, ready bool) bool {
	p, ok := m.part(k, src)
	if !ok {
		return false
	}
	groups := p.GetEndpointGroups()
	if len(groups) == 0 || len(groups[0].GetEndpoints()) == 0 {
		return false
	}
	return groups[0].GetEndpoints()[0].GetConditions().GetReady() == ready
}

// part is src's part of Service k's import in the cluster's view (parts are sorted by
// cluster ID).
func (m *member) part(k types.NamespacedName, src string) (*registryv1.ImportCluster, bool) {
	cls := m.watch.Get(k).GetClusters()
	i, ok := slices.BinarySearchFunc(cls, src, func(c *registryv1.ImportCluster, id string) int {
		return strings.Compare(c.GetClusterId(), id)
	})
	if !ok {
		return nil, false
	}
	return cls[i], true
}
