package store

import (
	"context"
	"sync"
)

// maxQueuedChanges bounds a subscriber's queue. Past it the queue collapses into one
// ChangeResync, so a stalled subscriber costs bounded memory and still misses nothing.
const maxQueuedChanges = 10000

// Feed fans changes out to subscribers without ever blocking the publisher. Stores embed
// it to implement Changes.
type Feed struct {
	mu   sync.Mutex
	subs map[*feedSub]struct{}
}

type feedSub struct {
	mu      sync.Mutex
	queue   []Change
	wake    chan struct{}
	overrun bool
}

// Publish queues c for every subscriber.
func (f *Feed) Publish(c Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.mu.Lock()
		switch {
		case s.overrun:
		case len(s.queue) >= maxQueuedChanges:
			s.overrun = true
			s.queue = s.queue[:0]
		default:
			s.queue = append(s.queue, c)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Subscribe returns a channel of changes published from now until ctx ends.
func (f *Feed) Subscribe(ctx context.Context) <-chan Change {
	s := &feedSub{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[*feedSub]struct{}{}
	}
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	out := make(chan Change)
	go func() {
		defer close(out)
		defer func() {
			f.mu.Lock()
			delete(f.subs, s)
			f.mu.Unlock()
		}()
		for {
			s.mu.Lock()
			batch := s.queue
			s.queue = nil
			if s.overrun {
				batch = []Change{{Kind: ChangeResync}}
				s.overrun = false
			}
			s.mu.Unlock()
			for _, c := range batch {
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
			if len(batch) > 0 {
				continue
			}
			select {
			case <-s.wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
