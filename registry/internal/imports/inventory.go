package imports

import (
	"sort"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/lease"
)

// Inventory is what one clusterset holds, as this replica's cache has it.
type Inventory struct {
	Clusterset string
	// ActiveClusters, HeldClusters and ExpiredClusters count the registered clusters by
	// lease state; held ones are expired by their renewals but held while replication
	// from the region of their last renewal lags.
	ActiveClusters, HeldClusters, ExpiredClusters int
	Exports                                       int
	Imports                                       int
	// Conflicts counts the imports whose exports disagree (ServiceImport.conflicts).
	Conflicts int
}

// Inventory returns the inventory of every clusterset loaded on this replica (those its
// clients watch or read), sorted by name. It costs one pass over each clusterset's
// imports, under its lock: a scrape's worth of work.
func (c *Cache) Inventory() []Inventory {
	c.mu.Lock()
	sets := make([]*set, 0, len(c.sets))
	for _, s := range c.sets {
		sets = append(sets, s)
	}
	c.mu.Unlock()
	now := c.now()
	repl := c.replication()
	out := make([]Inventory, 0, len(sets))
	for _, s := range sets {
		s.mu.Lock()
		if s.clusters == nil || s.closed {
			s.mu.Unlock()
			continue
		}
		inv := Inventory{Clusterset: s.name, Imports: len(s.imports)}
		for _, cl := range s.clusters {
			switch lease.Judge(cl, now, repl, s.leases[cl.ClusterID].State).State {
			case registryv1.LeaseState_LEASE_STATE_ACTIVE:
				inv.ActiveClusters++
			case registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION:
				inv.HeldClusters++
			default:
				inv.ExpiredClusters++
			}
		}
		for _, m := range s.byCluster {
			inv.Exports += len(m)
		}
		for _, imp := range s.imports {
			if len(imp.GetConflicts()) > 0 {
				inv.Conflicts++
			}
		}
		s.mu.Unlock()
		out = append(out, inv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Clusterset < out[j].Clusterset })
	return out
}
