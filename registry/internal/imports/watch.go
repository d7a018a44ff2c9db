package imports

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// ErrWatchEnded is returned by Next when the cache dropped the watched clusterset (for
// example after a store error); the client watches again and gets a snapshot.
var ErrWatchEnded = errors.New("watch ended by the registry; watch again")

// Watcher follows one clusterset's imports. Writers never wait for a watcher: they only
// wake it, and a watcher that falls behind the kept history gets a snapshot instead of the
// changes it missed.
type Watcher struct {
	set    *set
	filter Filter
	wake   chan struct{}
	// cursor is the revision the watcher has been sent; -1 until its first snapshot.
	cursor int64
	gone   bool
	// pageSize splits snapshots into pages of this many imports; 0: by size alone.
	pageSize int
	// paging is the snapshot being sent in pages: the imports not yet sent, at revision
	// pagingRev; the cursor moves there once the last page is out.
	paging    []*registryv1.ServiceImport
	pagingRev int64
	pageNo    int
}

// MaxPageSize bounds WatchImportsRequest.snapshot_page_size.
const MaxPageSize = 10000

// Watch starts a watch. It resumes after resumeRevision when resumeEpoch is this cache's
// epoch and the changes after that revision are still held; otherwise the first Next
// returns a snapshot.
//
// pageSize (0 to MaxPageSize; 0: no pages) splits each snapshot into messages of at most
// that many imports.
func (c *Cache) Watch(ctx context.Context, clusterset string, f Filter, pageSize int, resumeEpoch string, resumeRevision int64) (*Watcher, error) {
	for {
		s, err := c.loaded(ctx, clusterset)
		if err != nil {
			return nil, err
		}
		w := &Watcher{set: s, filter: f, wake: make(chan struct{}, 1), cursor: -1, pageSize: pageSize}
		s.mu.Lock()
		if s.closed {
			// Released or dropped between loading and here: load it again.
			s.mu.Unlock()
			continue
		}
		if resumeEpoch == s.epoch && resumeRevision > 0 && s.resumableLocked(resumeRevision) {
			w.cursor = resumeRevision
		}
		s.watchers[w] = struct{}{}
		s.mu.Unlock()
		return w, nil
	}
}

// resumableLocked reports whether every change after rev is still in the log.
func (s *set) resumableLocked(rev int64) bool {
	if rev > s.revision {
		return false
	}
	if rev == s.revision {
		return true
	}
	held := s.heldLogLocked()
	return len(held) > 0 && held[0].rev <= rev+1
}

// heldLogLocked is the log's window of the last history changes; older entries are
// storage not yet trimmed.
func (s *set) heldLogLocked() []logEntry {
	if n := len(s.log) - s.cache.history; n > 0 {
		return s.log[n:]
	}
	return s.log
}

// Close stops the watch.
func (w *Watcher) Close() {
	w.set.mu.Lock()
	delete(w.set.watchers, w)
	w.set.mu.Unlock()
	w.set.cache.release(w.set)
}

// Next blocks until there is something to send and returns it: a snapshot first (unless
// resumed), then deltas holding every import changed since the last response.
func (w *Watcher) Next(ctx context.Context) (*Message, error) {
	s := w.set
	for {
		s.mu.Lock()
		if w.gone || s.closed {
			s.mu.Unlock()
			return nil, ErrWatchEnded
		}
		if w.paging != nil {
			resp := w.nextPageLocked()
			s.mu.Unlock()
			return resp, nil
		}
		if w.cursor < 0 || !s.resumableLocked(w.cursor) {
			w.paging, w.pagingRev, w.pageNo = s.listLocked(w.filter), s.revision, 0
			resp := w.nextPageLocked()
			s.mu.Unlock()
			if f := s.cache.obs.Snapshot; f != nil {
				f()
			}
			return resp, nil
		}
		if w.cursor < s.revision {
			resp := s.shared.getLocked(messageKey{from: w.cursor, to: s.revision, filter: w.filter}, w.deltaLocked)
			w.cursor = s.revision
			s.mu.Unlock()
			if resp != nil {
				if f := s.cache.obs.Delta; f != nil {
					f()
				}
				return resp, nil
			}
			continue
		}
		s.mu.Unlock()
		select {
		case <-w.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// deltaLocked builds the changes since the cursor; nil when none of them passes the filter.
func (w *Watcher) deltaLocked() *registryv1.WatchImportsResponse {
	s := w.set
	seen := map[store.ServiceKey]bool{}
	resp := &registryv1.WatchImportsResponse{Epoch: s.epoch, Revision: s.revision}
	// The log is ordered by revision; find the first entry after the cursor.
	lo, hi := 0, len(s.log)
	for lo < hi {
		mid := (lo + hi) / 2
		if s.log[mid].rev <= w.cursor {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for _, e := range s.log[lo:] {
		if seen[e.key] || !w.filter.match(e.key) {
			continue
		}
		seen[e.key] = true
		imp, ok := s.imports[e.key]
		switch {
		case !ok:
			resp.Deletes = append(resp.Deletes, &registryv1.ServiceKey{Namespace: e.key.Namespace, Name: e.key.Name})
		case w.filter.ClusterDeltas:
			// The first change after the cursor recorded what the watcher holds.
			if d := deltaOf(e.prev, imp, w.filter); d != nil {
				resp.Deltas = append(resp.Deltas, d)
			}
		default:
			resp.Upserts = append(resp.Upserts, w.filter.view(imp))
		}
	}
	if len(resp.Upserts) == 0 && len(resp.Deletes) == 0 && len(resp.Deltas) == 0 {
		return nil
	}
	return resp
}

// MaxPageBytes bounds the imports of one snapshot message (an import larger than it goes
// alone): well under the 4 MiB every generated gRPC client accepts by default.
const MaxPageBytes = 2 << 20

// nextPageLocked returns the next page of the snapshot being sent: at most pageSize imports
// (0: any number) and MaxPageBytes. Watchers at the same revision with the same filter and
// page size share the pages: the cut is the same for all of them, so it is made once, by
// the watcher that builds the page (sizing every import for each of a hundred watchers
// took 10 s of a reconnect storm), and the others take the page's length.
func (w *Watcher) nextPageLocked() *Message {
	s := w.set
	k := messageKey{from: -1, to: w.pagingRev, filter: w.filter, pageSize: w.pageSize, page: w.pageNo}
	msg := s.shared.getLocked(k, func() *registryv1.WatchImportsResponse {
		n := pageCut(w.paging, w.pageSize)
		resp := &registryv1.WatchImportsResponse{Epoch: s.epoch, Revision: w.pagingRev, Snapshot: w.pageNo == 0,
			Upserts: w.paging[:n], SnapshotContinues: n < len(w.paging)}
		if resp.Snapshot {
			resp.StartedEmpty = s.cache.startedEmpty
		}
		return resp
	})
	rest := w.paging[len(msg.GetUpserts()):]
	w.pageNo++
	w.paging = rest
	if len(rest) == 0 {
		w.paging, w.cursor = nil, w.pagingRev
	}
	return msg
}

// pageCut is how many of imports the next page holds: at most pageSize (0: any number),
// and no more than MaxPageBytes unless one import alone is larger.
func pageCut(imports []*registryv1.ServiceImport, pageSize int) int {
	limit := pageSize
	if limit == 0 {
		limit = len(imports)
	}
	n, size := 0, 0
	for n < len(imports) && n < limit {
		sz := proto.Size(imports[n])
		if n > 0 && size+sz > MaxPageBytes {
			break
		}
		size += sz
		n++
	}
	return n
}
