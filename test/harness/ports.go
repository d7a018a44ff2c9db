package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports for servers started by tests come from below the kernel's ephemeral range, so no
// outgoing connection of any process can take one between FreePort and the server's bind
// (or while a server restarts on the same port). Test binaries of several packages run at
// once; a lock file per port, held until the process exits, keeps them apart.
var ports struct {
	mu    sync.Mutex
	held  map[int]*os.File
	lo    int
	hi    int
	ready bool
}

// FreePort returns a TCP port on 127.0.0.1, free now and reserved for this test process.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return port
}

// freePort is FreePort without a test to fail.
func freePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if !ports.ready {
		ports.lo, ports.hi = PortRange()
		ports.held = map[int]*os.File{}
		ports.ready = true
	}
	if ports.hi <= ports.lo {
		return ephemeralPort()
	}
	dir := filepath.Join(os.TempDir(), "global-discovery-mcs-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("port locks: %w", err)
	}
	// Shared by every user's test processes, as /tmp is (world-writable, sticky): a
	// developer's tests must find ports after root's ran (`sudo make test`), and keep out
	// of their way when both run. Only the folder's owner can set it; others go on.
	_ = os.Chmod(dir, 0o777|os.ModeSticky)
	for range 1000 {
		port := ports.lo + rand.IntN(ports.hi-ports.lo)
		if ports.held[port] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if errors.Is(err, fs.ErrPermission) {
			// Another user's lock file: a read-only descriptor locks it all the same.
			f, err = os.Open(filepath.Join(dir, strconv.Itoa(port)))
		}
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		l, err := net.Listen("tcp", Addr(port))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		ports.held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d)", ports.lo, ports.hi)
}

// PortRange is where FreePort takes ports: [10000, the start of the kernel's ephemeral
// range), capped at 30000 ports.
func PortRange() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil {
				hi = start
			}
		}
	}
	return lo, min(hi, lo+30000)
}

// ephemeralPort is the fallback when the ephemeral range leaves no room below it.
func ephemeralPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
