package dynamodb

import (
	"sync"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// maxPriors bounds the exports a replica remembers the prior of (about 100 bytes each):
// past it the memory is cleared, which costs only the reads it saved.
const maxPriors = 1 << 16

// priors remembers, for each export this replica wrote, what the table holds of it after
// that write: the prior of the next write of the same export. A cluster's controller keeps
// writing through one replica, so its next write (a readiness flip) needs no read first.
// A remembered prior is only ever a guess: the write's own condition (writeUs) tells one
// that another replica or a delete changed, and the write then reads the item and retries,
// as it does when a read prior changed before its write. The quotas stay exact: the usage
// change is in the same transaction as that condition.
type priors struct {
	mu sync.Mutex
	m  map[priorKey]prior
}

type priorKey struct {
	clusterset, clusterID string
	service               store.ServiceKey
}

func exportPriorKey(e store.Export) priorKey {
	return priorKey{clusterset: e.Clusterset, clusterID: e.ClusterID, service: e.Service}
}

// get returns the remembered prior of the export, if any.
func (p *priors) get(k priorKey) (prior, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.m[k]
	return old, ok
}

// put remembers what the table holds of the export after this replica's write.
func (p *priors) put(k priorKey, after prior) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxPriors {
		p.m = map[priorKey]prior{}
	}
	p.m[k] = after
}

// forget drops the export's remembered prior (this replica deleted it, or a sync read it).
func (p *priors) forget(k priorKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, k)
}
