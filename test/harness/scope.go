package harness

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Scope is the testing.TB of what a package's tests share, such as clusters with real nodes
// (a minute or more to start): the first test that needs it sets it up through Use, and
// what the harness starts then lives until the package's TestMain calls Close. While a test
// sets it up, failures and logs go to that test.
//
// It implements only what the harness calls on a testing.TB (Helper, Cleanup, TempDir,
// Failed, Log, Logf, Error, Errorf, Fatal, Fatalf, Name); anything else panics.
type Scope struct {
	testing.TB // the test setting the scope up, during Use; nil otherwise

	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool
}

// Use runs setup with the scope as its testing.TB, on behalf of t. A setup that fails
// leaves nothing behind: the scope is closed, and the next Use starts again.
func (s *Scope) Use(t testing.TB, setup func(tb testing.TB)) {
	t.Helper()
	s.mu.Lock()
	s.TB = t
	s.mu.Unlock()
	ok := false
	defer func() {
		s.mu.Lock()
		s.TB = nil
		s.mu.Unlock()
		if !ok {
			s.Close(true)
		}
	}()
	setup(s)
	ok = true
}

// Close runs the scope's cleanups, last first. failed says whether any test of the package
// failed: the processes then print their output, as they do at the end of a failed test.
func (s *Scope) Close(failed bool) {
	s.mu.Lock()
	s.failed = s.failed || failed
	cleanups, dirs := s.cleanups, s.dirs
	s.cleanups, s.dirs = nil, nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// current is the test setting the scope up, or nil.
func (s *Scope) current() testing.TB {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.TB
}

// Helper does nothing: the scope has no test of its own to mark helpers in.
func (s *Scope) Helper() {}

// Name names the scope in what the harness prints.
func (s *Scope) Name() string { return "scope" }

// Cleanup registers f to run at Close, last first.
func (s *Scope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// TempDir returns a new folder, removed at Close.
func (s *Scope) TempDir() string {
	d, err := os.MkdirTemp("", "harness-scope-")
	if err != nil {
		s.Fatalf("harness: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs = append(s.dirs, d)
	return d
}

// Failed reports whether a set-up or, at Close, the package failed.
func (s *Scope) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Log is Logf with the arguments printed as fmt.Sprint does.
func (s *Scope) Log(args ...any) { s.Logf("%s", fmt.Sprint(args...)) }

// Logf logs to the test setting the scope up, or to stderr.
func (s *Scope) Logf(format string, args ...any) {
	if t := s.current(); t != nil {
		t.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Error is Errorf with the arguments printed as fmt.Sprint does.
func (s *Scope) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

// Errorf marks the scope failed and reports to the test setting it up, or to stderr.
func (s *Scope) Errorf(format string, args ...any) {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	if t := s.current(); t != nil {
		t.Errorf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "FAIL (shared set-up): "+format+"\n", args...)
}

// Fatal is Fatalf with the arguments printed as fmt.Sprint does.
func (s *Scope) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprint(args...)) }

// Fatalf fails the test setting the scope up and ends it. Outside Use there is no test to
// end: it panics, which fails the package.
func (s *Scope) Fatalf(format string, args ...any) {
	t := s.current()
	if t == nil {
		panic(fmt.Sprintf("harness: shared set-up failed outside a test: "+format, args...))
	}
	t.Fatalf(format, args...)
}
