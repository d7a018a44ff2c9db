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
// tells its listeners the Services whose import changed. What it shows is the registry's
// imports as they are; it keeps nothing the registry does not hold.
//
// It also reports a registry that refills (see refill): after the registry's epoch
// changes, the clusters seen before are awaited until each appears again, for RefillHold
// at most; the importer keeps their objects meanwhile (RefillUntil).
type ImportWatch struct {
	Pool             *Pool
	Clusterset       string
	IncludeEndpoints bool
	// RefillHold is the longest a cluster is awaited after the registry refills: the
	// cluster's lease duration, after which a cluster that did not return has left. 0:
	// none is awaited.
	RefillHold time.Duration
	Log        *slog.Logger
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
	// refill is the registry's refill while one lasts; nil otherwise.
	refill *refill
	// lost is when the stream last ended, zero while one delivers: a refill counts from
	// there, since the clusters' renewals stopped reaching the old epoch then at the latest.
	lost time.Time
	// startedEmpty is the started_empty of the snapshot being received.
	startedEmpty time.Time
}

// snapshotPageSize bounds a snapshot message: 256 imports of 100 clusters × 10 endpoints
// are about 9 MB, well within the 256 MiB the pool accepts.
const snapshotPageSize = 256

// Get returns a Service's import as the registry holds it, or nil.
func (w *ImportWatch) Get(k types.NamespacedName) *registryv1.ServiceImport {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.Imports[k]
}

// Keys returns the Services that have an import now.
func (w *ImportWatch) Keys() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(w.view.Imports))
	for k := range w.view.Imports {
		out = append(out, k)
	}
	return out
}

// RefillUntil is until when a source cluster missing from the imports may still send its
// exports again to a registry that refills; zero when the registry does not refill or the
// cluster appeared since it began. A refill begins when the registry's epoch changes (the
// clusters of the old epoch are awaited, for RefillHold from the end of the old epoch's
// stream at most), or when this watch's first snapshot comes from a registry whose store
// started empty (a memory-store registry that restarted, maybe together with this
// controller, as one release upgrades both) less than RefillHold before (every cluster
// not seen since is awaited, until that start plus RefillHold).
func (w *ImportWatch) RefillUntil(cluster string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refill == nil || !w.refill.awaits(cluster) || time.Now().After(w.refill.until) {
		return time.Time{}
	}
	return w.refill.until
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
	newEpoch := w.view.Snapshot && oldEpoch != "" && resp.GetEpoch() != oldEpoch
	if w.view.Snapshot {
		if w.RefillHold > 0 && newEpoch {
			w.startRefillLocked(old, oldEpoch, resp.GetEpoch())
		}
		if w.RefillHold > 0 && oldEpoch == "" && !w.startedEmpty.IsZero() {
			// At most one hold from now, whatever the registry's clock says: a start time
			// in the future must not keep imports that are gone for longer than that.
			until := w.startedEmpty.Add(w.RefillHold)
			if limit := time.Now().Add(w.RefillHold); until.After(limit) {
				until = limit
			}
			if time.Until(until) > 0 {
				w.beginRefillLocked(&refill{until: until, seen: map[string]bool{}, after: "the registry started empty"})
				w.log().Info("the registry started empty shortly before this controller; keeping what this cluster imported of clusters missing from its imports until they send their exports again",
					"registry_started", w.startedEmpty, "at_most_until", until)
			}
		}
		w.synced = true
	}
	w.lost = time.Time{}
	if f := w.refill; f != nil {
		imps := make([]*registryv1.ServiceImport, 0, len(changed))
		for _, k := range changed {
			if imp := w.view.Imports[k]; imp != nil {
				imps = append(imps, imp)
			}
		}
		if back := f.saw(imps); len(back) > 0 && f.awaited != nil {
			w.log().Info("clusters sent their exports to the registry again; what was kept of them is the registry's again", "clusters", back, "still_awaited", len(f.awaited))
		}
		if f.awaited != nil && len(f.awaited) == 0 {
			w.endRefillLocked("every cluster returned")
		}
	}
	w.mu.Unlock()
	if newEpoch && w.OnEpochChange != nil {
		w.OnEpochChange()
	}
	w.changed(changed)
}

func (w *ImportWatch) log() *slog.Logger {
	if w.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Log
}

// changed tells the listeners the Services whose import changed.
func (w *ImportWatch) changed(keys []types.NamespacedName) {
	w.mu.Lock()
	notify := w.onChange
	w.mu.Unlock()
	if len(keys) > 0 && notify != nil {
		notify(keys)
	}
}

// startRefillLocked begins the refill after the snapshot of a new epoch: the clusters seen
// before it (the old epoch's imports, and those a refill already awaited: a second restart
// loses what returned after the first) are awaited from when the old stream ended.
func (w *ImportWatch) startRefillLocked(imports map[types.NamespacedName]*registryv1.ServiceImport, from, epoch string) {
	awaited := clustersOf(imports)
	if w.refill != nil {
		if w.refill.awaited != nil {
			maps.Copy(awaited, w.refill.awaited)
		}
		w.endRefillLocked("the epoch changed again")
	}
	since := w.lost
	if since.IsZero() {
		since = time.Now()
	}
	left := time.Until(since.Add(w.RefillHold))
	if len(awaited) == 0 || left <= 0 {
		// Apart longer than a lease: every lease of the old epoch has expired.
		return
	}
	w.beginRefillLocked(&refill{until: since.Add(w.RefillHold), awaited: awaited, after: "the registry's epoch changed"})
	w.log().Info("the registry's epoch changed (a restart or another registry replica); holding every cluster's imported endpoints until it sends its exports again",
		"from_epoch", from, "to_epoch", epoch, "clusters", len(awaited), "at_most", left.Round(time.Millisecond))
}

// beginRefillLocked makes f the refill, logging its end when its time is up.
func (w *ImportWatch) beginRefillLocked(f *refill) {
	w.refill = f
	f.timer = time.AfterFunc(time.Until(f.until), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.refill == f {
			w.endRefillLocked("time is up; the clusters that did not return have left")
		}
	})
}

func (w *ImportWatch) endRefillLocked(why string) {
	var awaited []string
	if w.refill.awaited != nil {
		awaited = slices.Sorted(maps.Keys(w.refill.awaited))
	}
	w.log().Info("the hold after "+w.refill.after+" ended: "+why, "not_returned", awaited)
	w.refill.timer.Stop()
	w.refill = nil
}
