// Package filereload keeps a value read from files that are replaced while the process
// runs — a certificate renewed by cert-manager (a Secret volume swapped under the pod), a
// CA bundle with a CA added — current, with no restart and no goroutine: Get looks at the
// files at most once a second and reads them again when their contents changed. A read
// that fails (a file missing or half-written mid-rotation) keeps the last good value, logs
// once per bad content, and is tried again when the files change again.
//
// The registry's serving key pair and client CAs, and the controller's client
// certificate and registry CAs, all reload through it.
package filereload

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CheckEvery bounds how often the files are looked at. They are small, and connections are
// long-lived, so reading them on a handshake costs nothing, and a rotation is seen by the
// first connection after it rather than after a polling period.
const CheckEvery = time.Second

// Value is the last good value read from some files.
type Value[T any] struct {
	name  string
	files []string
	read  func() (T, error)
	log   *slog.Logger
	// reloaded, when set, hears each reload after a change: ok, and the new value.
	reloaded func(ok bool, v T)

	mu       sync.Mutex
	checked  time.Time
	stamp    string // of the files the value was read from
	badStamp string // of files that failed to read, logged once
	v        T
}

// Options of a Value. Any field may be zero.
type Options[T any] struct {
	Log *slog.Logger
	// Reloaded is called after the files changed and were read again (ok) or could not be
	// (the last good value stays).
	Reloaded func(ok bool, v T)
}

// Load reads the value with read, which reads files (empty names are skipped), and
// returns the Value that keeps it current. name says what the files are, in logs ("TLS
// files" logs "TLS files reloaded"). read's error
// should name the flag of the file that is wrong; it is returned as is.
func Load[T any](name string, files []string, read func() (T, error), opts Options[T]) (*Value[T], error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Value[T]{name: name, read: read, log: log, reloaded: opts.Reloaded}
	for _, f := range files {
		if f != "" {
			r.files = append(r.files, f)
		}
	}
	// Read first: its errors name the flag of the file that is wrong.
	v, err := read()
	if err != nil {
		return nil, err
	}
	stamp, err := r.stampOf()
	if err != nil {
		return nil, err
	}
	r.v, r.stamp, r.checked = v, stamp, time.Now()
	return r, nil
}

// Get returns the value to use now, read again when the files changed since.
func (r *Value[T]) Get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < CheckEvery {
		return r.v
	}
	r.checked = time.Now()
	stamp, err := r.stampOf()
	if err != nil || stamp == r.stamp {
		// A file missing mid-rotation: keep what works until it is back.
		return r.v
	}
	v, err := r.read()
	if err != nil {
		// A half-written rotation (a new certificate with the old key) reads on a later
		// look, once the files agree; meanwhile the last good value serves.
		if stamp != r.badStamp {
			r.badStamp = stamp
			r.log.Warn(r.name+" changed but cannot be used; keeping the previous ones", "files", r.files, "error", err)
			if r.reloaded != nil {
				r.reloaded(false, r.v)
			}
		}
		return r.v
	}
	r.v, r.stamp, r.badStamp = v, stamp, ""
	r.log.Info(r.name+" reloaded", "files", r.files)
	if r.reloaded != nil {
		r.reloaded(true, v)
	}
	return r.v
}

// stampOf identifies the files' contents. The contents, not the modification times: two
// writes within one tick of the kernel's file clock, of the same size, look alike to stat.
func (r *Value[T]) stampOf() (string, error) {
	h := sha256.New()
	for _, f := range r.files {
		b, err := os.ReadFile(f) //nolint:gosec // G304: the operator names the files, in flags.
		if err != nil {
			return "", fmt.Errorf("%s: %w", r.name, err)
		}
		sum := sha256.Sum256(b)
		h.Write(sum[:])
	}
	return string(h.Sum(nil)), nil
}
