package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// TestRouteLogs: with RouteLogs, what client-go and leader election log through klog comes
// out as JSON lines of the process's logger, beside controller-runtime's; without it, klog
// writes its own text lines (I1205 12:00:00.000000 …) to stderr.
func TestRouteLogs(t *testing.T) {
	var buf bytes.Buffer
	RouteLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("structured from klog", "lock", "mcs-system/mcs-controller")
	klog.Info("unstructured from klog")
	klog.ErrorS(errors.New("boom"), "an error from klog")
	ctrl.Log.WithName("test").Info("from controller-runtime")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"structured from klog", "unstructured from klog", "an error from klog", "from controller-runtime"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %q", i, line)
		}
		if msg, _ := rec["msg"].(string); !strings.Contains(msg, want[i]) {
			t.Errorf("line %d: msg %q, want %q", i, msg, want[i])
		}
	}
}
