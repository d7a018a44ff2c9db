package registryclient

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/importdelta"
)

// types.NamespacedName names a Service.

func keyOf(k *registryv1.ServiceKey) types.NamespacedName {
	return types.NamespacedName{Namespace: k.GetNamespace(), Name: k.GetName()}
}

// ImportWatch mirrors the clusterset's imports from the registry's WatchImports stream. It
// resumes from the last revision after a reconnect, follows the pool's current URL, and
// tells its listeners the Services whose import changed.
//
// When the registry's epoch changes (another registry process answers, for example a
// memory-store registry that restarted empty), the entries of the clusters seen before are
// held until each cluster appears again, or for RefillHold at most (see refillHold).
type ImportWatch struct {
	Pool             *Pool
	Clusterset       string
	IncludeEndpoints bool
	// RefillHold is the longest a cluster's entries are held after an epoch change: the
	// cluster's lease duration, after which a cluster that did not return has left. 0: no hold.
	RefillHold time.Duration
	Log        *slog.Logger
	// OnHold receives the number of clusters held, when it changes.
	OnHold func(clusters int)
	// OnEpochChange runs when a snapshot of a new epoch arrives: another registry process
	// answers, which may not know this cluster (a memory-store restart), so the session
	// checks its lease now rather than at its next renewal. It must not block.
	OnEpochChange func()

	mu sync.Mutex
	// onChange tells Run's listeners the Services whose import changed.
	onChange func(keys []types.NamespacedName)
	// view holds the imports as the stream sent them (epoch and revision included).
	view   importdelta.View[types.NamespacedName]
	synced bool
	hold   *refillHold
	// holdEnd fires when the hold's time is up.
	holdEnd *time.Timer
	// lost is when the stream last ended, zero while one delivers: a hold counts from
	// there, since the clusters' renewals stopped reaching the old epoch then at the latest.
	lost time.Time
	// startedEmpty is the started_empty of the snapshot being received.
	startedEmpty time.Time
	// refillUntil: the first snapshot came from a registry that started empty less than
	// RefillHold before, and this watch has nothing of the earlier epoch to hold; until
	// then the importer keeps what the cluster holds of clusters missing from the imports.
	refillUntil time.Time
}

// snapshotPageSize bounds a snapshot message: 256 imports of 100 clusters × 10 endpoints
// are about 9 MB, well within the 256 MiB the pool accepts.
const snapshotPageSize = 256

// Get returns a Service's import, or nil. During a hold it includes the held entries.
func (w *ImportWatch) Get(k types.NamespacedName) *registryv1.ServiceImport {
	imp, _ := w.GetHeld(k)
	return imp
}

// GetHeld returns a Service's import and the clusters whose entries in it are held from
// before the registry's epoch changed.
func (w *ImportWatch) GetHeld(k types.NamespacedName) (*registryv1.ServiceImport, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hold == nil {
		return w.view.Imports[k], nil
	}
	return withHeld(w.view.Imports[k], w.hold.before[k], w.hold.waiting)
}

// Keys returns the Services that have an import now, held ones included.
func (w *ImportWatch) Keys() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(w.view.Imports))
	for k := range w.view.Imports {
		out = append(out, k)
	}
	if w.hold != nil {
		for _, k := range w.hold.keys() {
			if _, ok := w.view.Imports[k]; !ok {
				out = append(out, k)
			}
		}
	}
	return out
}

// RefillUntil is when the importer may delete what the cluster holds of clusters missing
// from the imports; zero: at once. It is set when this watch's first snapshot comes from a
// registry whose store started empty (a memory-store registry that restarted, maybe
// together with this controller, as one release upgrades both) less than RefillHold
// before: the clusters that registered with the registry before may not have sent their
// exports again yet, and this process has nothing of the earlier epoch to hold.
func (w *ImportWatch) RefillUntil() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refillUntil
}

// Synced reports whether a snapshot has been received from the current registry.
func (w *ImportWatch) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// ImportListener is told which Services' imports changed (all known ones after a
// snapshot): the export and import reconcilers.
type ImportListener interface {
	ImportsChanged(ctx context.Context, keys []types.NamespacedName)
}

// watchRetryMax bounds the wait between attempts to watch again. The hold after a registry
// restart keeps a source cluster's endpoints for at most one lease (30 s by default) from
// when the old watch ended; the new registry's imports reach this cluster only through the
// watch, so the watch must be back well within the hold. A longer step (it was 30 s, drawn
// from 15-45 s) let the hold end before the watch returned after a 20 s restart.
const watchRetryMax = 5 * time.Second

// Run watches until ctx ends, reconnecting with backoff and jitter, and tells every
// listener, in order, what changed.
func (w *ImportWatch) Run(ctx context.Context, listeners ...ImportListener) error {
	w.mu.Lock()
	w.onChange = func(keys []types.NamespacedName) {
		for _, l := range listeners {
			l.ImportsChanged(ctx, keys)
		}
	}
	w.mu.Unlock()
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	b := newBackoff(time.Second, watchRetryMax)
	for ctx.Err() == nil {
		received, err := w.once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		if w.lost.IsZero() {
			w.lost = time.Now()
		}
		w.mu.Unlock()
		// A registry that answers "clusterset unknown" is up but empty (a memory-store
		// registry that restarted): the clusterset returns with the first registration, so
		// keep asking at the shortest interval.
		if received || ClustersetUnknown(err) {
			b.reset()
		}
		if hint := Diagnose(err); hint != "" {
			w.Log.Warn("import watch ended; watching again", "error", err, "retry_in", b.current().String(), "hint", hint)
		} else {
			w.Log.Info("import watch ended; watching again", "error", err, "retry_in", b.current().String())
		}
		if !b.wait(ctx) {
			return nil
		}
	}
	return nil
}

// once runs one stream; it ends when the stream breaks or the pool moves to another URL.
func (w *ImportWatch) once(ctx context.Context) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	// A snapshot cut short by the stream's end is not applied; the next stream resumes from
	// what was.
	w.view.StreamEnded()
	req := &registryv1.WatchImportsRequest{Clusterset: w.Clusterset, IncludeEndpoints: w.IncludeEndpoints, ResumeEpoch: w.view.Epoch, ResumeRevision: w.view.Revision,
		ClusterDeltas: true, SnapshotPageSize: snapshotPageSize}
	w.mu.Unlock()
	var stream registryv1.RegistryService_WatchImportsClient
	url, err := w.Pool.Stream(sctx, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		var err error
		stream, err = c.WatchImports(ctx, req)
		if err == nil {
			// The first message proves the server answers; without it a stream to a dead
			// URL would look open.
			var first *registryv1.WatchImportsResponse
			if first, err = stream.Recv(); err == nil {
				w.apply(first)
			}
		}
		return err
	})
	if err != nil {
		return false, err
	}
	// Follow failovers and failbacks: a stream stays on the URL it opened on.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if w.Pool.Current() != url {
					cancel()
					return
				}
			}
		}
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return true, err
		}
		w.apply(resp)
	}
}

func (w *ImportWatch) apply(resp *registryv1.WatchImportsResponse) {
	w.mu.Lock()
	if w.view.KeyOf == nil {
		w.view.KeyOf = keyOf
	}
	old, oldEpoch := w.view.Imports, w.view.Epoch
	if resp.GetSnapshot() {
		w.startedEmpty = time.Time{}
		if t := resp.GetStartedEmpty(); t != nil {
			w.startedEmpty = t.AsTime()
		}
	}
	changed, done := w.view.Apply(resp)
	if !done {
		w.mu.Unlock()
		return // a page of a snapshot: the importer never sees a partial set
	}
	heldBefore := w.heldLocked()
	newEpoch := w.view.Snapshot && oldEpoch != "" && resp.GetEpoch() != oldEpoch
	if w.view.Snapshot {
		if w.hold != nil {
			// Held-only Services change too when a new hold does not keep them.
			changed = append(changed, w.hold.keys()...)
		}
		if w.RefillHold > 0 && newEpoch {
			w.startHoldLocked(old, oldEpoch, resp.GetEpoch())
		}
		if w.RefillHold > 0 && oldEpoch == "" && !w.startedEmpty.IsZero() {
			// At most one hold from now, whatever the registry's clock says: a start time
			// in the future must not keep imports that are gone for longer than that.
			until := w.startedEmpty.Add(w.RefillHold)
			if limit := time.Now().Add(w.RefillHold); until.After(limit) {
				until = limit
			}
			if time.Until(until) > 0 {
				w.refillUntil = until
				w.log().Info("the registry started empty shortly before this controller; keeping what this cluster imported of clusters missing from its imports until they send their exports again",
					"registry_started", w.startedEmpty, "at_most_until", until)
			}
		}
		w.synced = true
	}
	w.lost = time.Time{}
	if w.hold != nil {
		released, keys := w.hold.update(w.view.Imports)
		changed = append(changed, keys...)
		if len(released) > 0 {
			w.log().Info("clusters sent their exports to the registry again; their held entries are released", "clusters", released, "still_held", len(w.hold.waiting))
		}
		if len(w.hold.waiting) == 0 {
			w.endHoldLocked("every cluster returned")
		}
	}
	held := w.heldLocked()
	if held == heldBefore {
		held = -1
	}
	w.mu.Unlock()
	if newEpoch && w.OnEpochChange != nil {
		w.OnEpochChange()
	}
	w.changed(changed, held)
}

func (w *ImportWatch) heldLocked() int {
	if w.hold == nil {
		return 0
	}
	return len(w.hold.waiting)
}

func (w *ImportWatch) log() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}

// changed reports what apply or the hold's end changed; held < 0: the count did not change.
func (w *ImportWatch) changed(keys []types.NamespacedName, held int) {
	if held >= 0 && w.OnHold != nil {
		w.OnHold(held)
	}
	w.mu.Lock()
	notify := w.onChange
	w.mu.Unlock()
	if len(keys) > 0 && notify != nil {
		notify(keys)
	}
}

// startHoldLocked holds what the importer saw before the snapshot of a new epoch (imports
// of epoch from; held entries of an earlier hold included: a second restart loses what
// returned after the first).
func (w *ImportWatch) startHoldLocked(imports map[types.NamespacedName]*registryv1.ServiceImport, from, epoch string) {
	before := maps.Clone(imports)
	if before == nil {
		before = map[types.NamespacedName]*registryv1.ServiceImport{}
	}
	if w.hold != nil {
		for _, k := range append(w.hold.keys(), slices.Collect(maps.Keys(imports))...) {
			before[k], _ = withHeld(imports[k], w.hold.before[k], w.hold.waiting)
		}
		w.endHoldLocked("the epoch changed again")
	}
	since := w.lost
	if since.IsZero() {
		since = time.Now()
	}
	left := time.Until(since.Add(w.RefillHold))
	if len(before) == 0 || left <= 0 {
		// Apart longer than a lease: every lease of the old epoch has expired.
		return
	}
	h := newRefillHold(from, epoch, before)
	w.hold = h
	w.log().Info("the registry's epoch changed (a restart or another registry replica); holding every cluster's imported endpoints until it sends its exports again",
		"from_epoch", h.from, "to_epoch", h.to, "clusters", len(h.waiting), "at_most", left.Round(time.Millisecond))
	w.holdEnd = time.AfterFunc(left, func() {
		w.mu.Lock()
		if w.hold != h {
			w.mu.Unlock()
			return
		}
		keys := h.keys()
		w.endHoldLocked("time is up; the clusters that did not return have left")
		w.mu.Unlock()
		w.changed(keys, 0)
	})
}

func (w *ImportWatch) endHoldLocked(why string) {
	w.log().Info("the hold after the registry's epoch changed ended: "+why, "not_returned", slices.Sorted(maps.Keys(w.hold.waiting)))
	w.hold = nil
	if w.holdEnd != nil {
		w.holdEnd.Stop()
		w.holdEnd = nil
	}
}
