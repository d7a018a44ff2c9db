package filereload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValueFollowsTheFiles: a change is read on the first Get a second after the last
// look; content that cannot be read, or a file gone mid-rotation, keeps the last good value
// (and the bad content is reported once); the next good content is read.
func TestValueFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "1")
	write(b, "1")
	read := func() (string, error) {
		x, err := os.ReadFile(a)
		if err != nil {
			return "", err
		}
		y, err := os.ReadFile(b)
		if err != nil {
			return "", err
		}
		if string(x) != string(y) {
			return "", errors.New("--a and --b do not match")
		}
		return string(x), nil
	}
	var events []string
	v, err := Load("pair", []string{a, "", b}, read, Options[string]{Reloaded: func(ok bool, s string) {
		events = append(events, map[bool]string{true: "ok:", false: "bad:"}[ok]+s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	look := func() string { time.Sleep(CheckEvery + 20*time.Millisecond); return v.Get() }
	for _, step := range []struct {
		do   func()
		want string
	}{
		{func() {}, "1"},
		{func() { write(a, "2"); write(b, "2") }, "2"},
		{func() { write(a, "3") }, "2"},                // half a rotation: the last good value
		{func() {}, "2"},                               // the same bad content: reported once
		{func() { os.Remove(b) }, "2"},                 // a file gone: kept
		{func() { write(b, "3") }, "3"},                // the rotation completes
		{func() { write(a, "3"); write(b, "3") }, "3"}, // rewritten, same content: no reload
	} {
		step.do()
		if got := look(); got != step.want {
			t.Fatalf("Get = %q, want %q (events %v)", got, step.want, events)
		}
	}
	if got := strings.Join(events, " "); got != "ok:2 bad:2 ok:3" {
		t.Fatalf("reloads %q, want %q", got, "ok:2 bad:2 ok:3")
	}
	// A first read that fails is Load's error, as read returned it.
	write(a, "x")
	if _, err := Load("pair", []string{a, b}, read, Options[string]{}); err == nil || !strings.Contains(err.Error(), "--a and --b") {
		t.Fatalf("Load = %v, want read's error", err)
	}
}
