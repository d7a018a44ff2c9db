package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one of the project's binaries (or another server) running for a test. Its
// output is kept and printed when the test fails.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartProcess starts path with args and stops it when the test ends.
func StartProcess(tb testing.TB, name, path string, args ...string) *Process {
	tb.Helper()
	return startProcess(tb, name, nil, path, args...)
}

// startProcess is StartProcess with the output also written to log (a node's log files).
func startProcess(tb testing.TB, name string, log io.Writer, path string, args ...string) *Process {
	tb.Helper()
	return startProcessEnv(tb, name, log, nil, path, args...)
}

// startProcessEnv is startProcess with env added to the test process's environment: what
// one process needs, given to it alone rather than to the whole test process.
func startProcessEnv(tb testing.TB, name string, log io.Writer, env []string, path string, args ...string) *Process {
	tb.Helper()
	p := &Process{Name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	var out io.Writer = p.out
	if log != nil {
		out = io.MultiWriter(p.out, log)
	}
	p.cmd.Stdout = out
	p.cmd.Stderr = out
	p.cmd.Env = append(os.Environ(), env...)
	// Own process group: a stop reaches children too, and nothing outlives the test.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("harness: start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Stop(10 * time.Second)
		if tb.Failed() {
			tb.Logf("--- output of %s ---\n%s", name, p.Output())
		}
	})
	return p
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns what the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Exited reports whether the process has ended, and its error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits for the process to end and returns its error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM, waits up to grace, then kills the process group.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Addr returns 127.0.0.1:port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// WaitHTTP waits until url answers 200, or the process exits, or the timeout passes.
func (p *Process) WaitHTTP(tb testing.TB, url string, timeout time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		if exited, err := p.Exited(); exited {
			tb.Fatalf("harness: %s exited before %s answered: %v\n%s", p.Name, url, err, p.Output())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("harness: %s did not answer %s within %s (last: %s)\n%s", p.Name, url, timeout, last, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
