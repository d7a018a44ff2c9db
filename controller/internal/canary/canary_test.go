package canary

import (
	"strconv"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

type fixedClock struct{ t time.Time }

func (c *fixedClock) RegistryNow() (time.Time, bool) { return c.t, !c.t.IsZero() }

func canaryImport(stamps map[string]time.Time) *registryv1.ServiceImport {
	imp := &registryv1.ServiceImport{}
	for _, id := range []string{"a", "b", "c"} {
		t, ok := stamps[id]
		if !ok {
			continue
		}
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: id, EndpointGroups: []*registryv1.EndpointGroup{{
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{address}, Hostname: stampPrefix + strconv.FormatInt(t.UnixMilli(), 10)}}}}})
	}
	return imp
}

func TestStamp(t *testing.T) {
	tests := []struct {
		hostname string
		ok       bool
	}{
		{"t1733450000123", true},
		{"t", false},
		{"x1733450000123", false},
		{"tabc", false},
		{"", false},
	}
	for _, tc := range tests {
		got, ok := Stamp(tc.hostname)
		if ok != tc.ok || (ok && got.UnixMilli() != 1733450000123) {
			t.Errorf("Stamp(%q) = %v, %v", tc.hostname, got, ok)
		}
	}
}

// TestRecorder: a source's first stamp is not measured (it may be old); each newer stamp
// is, against the registry's clock; a stamp seen again is not measured twice.
func TestRecorder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fixedClock{}
	var got []string
	r := &Recorder{Namespace: "mcs-system", Clock: clk, Observe: func(src string, d time.Duration) { got = append(got, src+"="+d.String()) }}
	r.Applied(canaryImport(map[string]time.Time{"a": t0})) // no clock yet
	clk.t = t0.Add(time.Second)
	r.Applied(canaryImport(map[string]time.Time{"a": t0, "b": t0}))
	if len(got) != 0 {
		t.Fatalf("first stamps measured: %v", got)
	}
	clk.t = t0.Add(2*time.Second + 300*time.Millisecond)
	r.Applied(canaryImport(map[string]time.Time{"a": t0.Add(2 * time.Second), "b": t0.Add(2*time.Second + 100*time.Millisecond)}))
	r.Applied(canaryImport(map[string]time.Time{"a": t0.Add(2 * time.Second), "b": t0.Add(2*time.Second + 100*time.Millisecond)}))
	if strings.Join(got, " ") != "a=300ms b=200ms" {
		t.Fatalf("measures = %v, want a=300ms b=200ms", got)
	}
	if s := r.Summary(); s != "a p50=0.300s p99=0.300s n=1; b p50=0.200s p99=0.200s n=1" {
		t.Fatalf("summary = %q", s)
	}
	if k := r.Key(); k.Namespace != "mcs-system" || k.Name != ServiceName {
		t.Fatalf("key = %v", k)
	}
}
