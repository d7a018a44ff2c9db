package store

// ChangeKind says what a Change is about.
type ChangeKind int

const (
	// ChangeCluster means a cluster was registered, renewed or deleted.
	ChangeCluster ChangeKind = iota + 1
	// ChangeExport means an export was written or deleted.
	ChangeExport
	// ChangeResync means changes may have been missed (for example a change feed restarted);
	// the receiver reloads the clusterset, or everything when Clusterset is empty.
	ChangeResync
)

// Change tells that a fact changed. It is the one form in which a change reaches a
// registry's cache: a store's change feed reports every write in it (other replicas'
// included), and the replica that made a write applies the write's result in it at once
// (read-your-writes) — the constructors below build it from a write's result, and the
// memory store's feed reports the same (Reported). An export change names the changed Services and,
// when Known, the cluster's exports of them after the change. A cluster change may carry
// the cluster's new state, saving a read.
type Change struct {
	Kind       ChangeKind
	Clusterset string
	ClusterID  string
	Service    ServiceKey
	// Services, when set (ChangeExport only), are several Services one write changed
	// together (a SyncExports); Service is then unset. A receiver applies them as one step,
	// so a watcher sees all of a cluster's synced exports or none of them.
	Services []ServiceKey
	// Known (ChangeExport only): Exports are the cluster's exports of the changed Services
	// after the change, and a changed Service absent from them is one whose export by the
	// cluster is gone. A receiver that already applied the write (the replica that made
	// it) can then tell its echo from news without reading the store.
	Known   bool
	Exports []Export
	// Whole (with Known): Exports are whole, endpoints included (a write's own result),
	// and are applied as they are; otherwise only their keys and UpdateTime are certain
	// (the dynamodb store's stream records carry no endpoint chunks) and a receiver that
	// does not hold them reads the store.
	Whole bool
	// Cluster is the cluster after the change, when known (ChangeCluster only).
	Cluster *Cluster
	// Deleted: the cluster was deleted (ChangeCluster only).
	Deleted bool
}

// Keys returns the Services an export change names.
func (c Change) Keys() []ServiceKey {
	if len(c.Services) > 0 || c.Service == (ServiceKey{}) {
		return c.Services
	}
	return []ServiceKey{c.Service}
}

// ClusterWritten is the change a RegisterCluster or RenewLease made: c is its result.
func ClusterWritten(c Cluster) Change {
	return Change{Kind: ChangeCluster, Clusterset: c.Clusterset, ClusterID: c.ClusterID, Cluster: &c}
}

// ClusterDeleted is the change a DeleteCluster made (its exports' removal is reported
// apart, or by a Resync).
func ClusterDeleted(key ClusterKey) Change {
	return Change{Kind: ChangeCluster, Clusterset: key.Clusterset, ClusterID: key.ClusterID, Deleted: true}
}

// ExportPut is the change a PutExport made: e is its result.
func ExportPut(e Export) Change {
	return Change{Kind: ChangeExport, Clusterset: e.Clusterset, ClusterID: e.ClusterID, Service: e.Service,
		Known: true, Whole: true, Exports: []Export{e}}
}

// ExportDeleted is the change a DeleteExport that found the export made.
func ExportDeleted(key ClusterKey, svc ServiceKey) Change {
	return Change{Kind: ChangeExport, Clusterset: key.Clusterset, ClusterID: key.ClusterID, Service: svc, Known: true}
}

// ExportsSynced is the change a SyncExports made: stored are the cluster's exports after
// it, deleted the Services whose export by the cluster it removed.
func ExportsSynced(key ClusterKey, stored []Export, deleted []ServiceKey) Change {
	keys := make([]ServiceKey, 0, len(stored)+len(deleted))
	for _, e := range stored {
		keys = append(keys, e.Service)
	}
	keys = append(keys, deleted...)
	return Change{Kind: ChangeExport, Clusterset: key.Clusterset, ClusterID: key.ClusterID, Services: keys,
		Known: true, Whole: true, Exports: stored}
}

// Reported is the change as a change feed reports it: what changed and when, its exports
// not taken as whole. The dynamodb store's stream records carry no endpoint chunks, and
// the memory store's feed reports its writes the same way, so the echo of a write takes
// one path whatever the store: the replica that applied the write skips it after a
// look-up, and the first to hear of it reads the store.
func (c Change) Reported() Change {
	c.Whole = false
	return c
}

// Resync is the change that makes a receiver reload a clusterset (every one when empty).
func Resync(clusterset string) Change {
	return Change{Kind: ChangeResync, Clusterset: clusterset}
}
