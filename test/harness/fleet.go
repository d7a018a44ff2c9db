package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FleetEvent is one line the fleet simulator (controller/internal/cmd/mcs-fleet) prints:
// a phase that begins or ends, with what it measured.
type FleetEvent struct {
	Event      string  `json:"event"`
	Seconds    float64 `json:"seconds"`
	WatchBytes int64   `json:"watch_bytes"`
	// Steady state: the clusters' export checks and syncs, and how many failed.
	Verifies     int64       `json:"verifies"`
	VerifyErrors int64       `json:"verify_errors"`
	Syncs        int64       `json:"syncs"`
	SyncErrors   int64       `json:"sync_errors"`
	LastError    string      `json:"last_error"`
	Churn        *FleetChurn `json:"churn"`
	Restart      *FleetBack  `json:"restart"`
}

// FleetChurn is what the simulator's churn phase measured (fleet.ChurnReport).
type FleetChurn struct {
	Flips      int     `json:"flips"`
	PutErrors  int     `json:"put_errors"`
	Missed     int     `json:"missed"`
	AllP50     float64 `json:"all_p50_ms"`
	AllP99     float64 `json:"all_p99_ms"`
	AllMax     float64 `json:"all_max_ms"`
	EachP50    float64 `json:"each_p50_ms"`
	EachP99    float64 `json:"each_p99_ms"`
	PutP50     float64 `json:"put_p50_ms"`
	PutP99     float64 `json:"put_p99_ms"`
	WatchBytes int64   `json:"watch_bytes"`
}

// FleetBack is what the simulator measured of a registry restart (fleet.RestartReport).
type FleetBack struct {
	ServedAgainSeconds float64 `json:"served_again_s"`
	WithoutSeconds     float64 `json:"without_endpoints_s"`
	ClustersWithout    int     `json:"clusters_without_endpoints"`
	WatchBytes         int64   `json:"watch_bytes"`
	Example            string  `json:"example"`
}

var (
	fleetOnce sync.Once
	fleetBin  string
	fleetErr  string
)

// FleetSimulator returns the fleet simulator's binary, built once per test process (it is a
// development tool inside the controller module, not in bin/).
func FleetSimulator(tb testing.TB) string {
	tb.Helper()
	fleetOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcs-fleet-")
		if err != nil {
			fleetErr = err.Error()
			return
		}
		bin := filepath.Join(dir, "mcs-fleet")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/ai-dynamo/global-discovery-mcs/controller/internal/cmd/mcs-fleet")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fleetErr = "building the fleet simulator: " + err.Error() + "\n" + string(out)
			return
		}
		fleetBin = bin
	})
	if fleetErr != "" {
		tb.Fatal(fleetErr)
	}
	return fleetBin
}

// RunFleet runs the fleet simulator with args until it exits, calling on with each event
// as it is printed (the caller measures the registry between them), and returns every
// event and the simulator's log. At restart_await (with --restart) it tells the simulator
// that the restart begins, then calls on, which restarts the registry. The test fails when
// the simulator fails.
func RunFleet(tb testing.TB, args []string, on func(FleetEvent)) ([]FleetEvent, string) {
	tb.Helper()
	cmd := exec.Command(FleetSimulator(tb), args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var events []FleetEvent
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev FleetEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			tb.Errorf("fleet simulator printed %q: %v", sc.Text(), err)
			continue
		}
		events = append(events, ev)
		if ev.Event == "restart_await" {
			if _, err := in.Write([]byte("restart\n")); err != nil {
				tb.Errorf("telling the fleet simulator of the restart: %v", err)
			}
		}
		if on != nil {
			on(ev)
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("fleet simulator: %v\n%s", err, tail(stderr.String(), 40))
	}
	return events, stderr.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
