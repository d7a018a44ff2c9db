package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	in := `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestSlow"}
{"Action":"pass","Package":"example.com/a","Test":"TestSlow/sub","Elapsed":1.5}
{"Action":"pass","Package":"example.com/a","Test":"TestSlow","Elapsed":2.25}
{"Action":"skip","Package":"example.com/a","Test":"TestNodes","Elapsed":0}
{"Action":"fail","Package":"example.com/a","Test":"TestBroken","Elapsed":0.5}
{"Action":"fail","Package":"example.com/a","Elapsed":3}
# example.com/b
b/b.go:1: syntax error
{"Action":"fail","Package":"example.com/b","Elapsed":0}
{"Action":"skip","Package":"example.com/c","Elapsed":0}
`
	r, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	wantTests := []timing{
		{Package: "example.com/a", Test: "TestSlow", Result: "pass", Elapsed: 2250 * time.Millisecond},
		{Package: "example.com/a", Test: "TestNodes", Result: "skip"},
		{Package: "example.com/a", Test: "TestBroken", Result: "fail", Elapsed: 500 * time.Millisecond},
	}
	wantPkgs := []timing{
		{Package: "example.com/a", Result: "fail", Elapsed: 3 * time.Second},
		{Package: "example.com/b", Result: "fail"},
	}
	tests := r.tests
	if d := cmp.Diff(wantTests, tests); d != "" {
		t.Errorf("tests (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantPkgs, r.pkgs); d != "" {
		t.Errorf("packages (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"pass": 2, "skip": 1, "fail": 1}, r.results); d != "" {
		t.Errorf("results, subtests counted too (-want +got):\n%s", d)
	}
	sortSlowest(tests)
	if tests[0].Test != "TestSlow" || tests[2].Test != "TestNodes" {
		t.Errorf("sortSlowest: %+v", tests)
	}
}

func TestReadRejectsABrokenEvent(t *testing.T) {
	if _, err := read(strings.NewReader("{\"Action\":\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want one naming line 1", err)
	}
}

// TestReadFailures: a failed test's last report lines, FIGUREs and logs of other files left
// out, and only the deepest failed tests (a parent that failed through its subtest is not
// repeated).
func TestReadFailures(t *testing.T) {
	in := `{"Action":"run","Package":"example.com/a","Test":"TestUpgrade"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:53: FIGURE ready in 0s\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    process.go:83: --- output of mcs-registry ---\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:1: one\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:2: two\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:3: three\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:4: four\n"}
{"Action":"output","Package":"example.com/a","Test":"TestUpgrade/Memory","Output":"    upgrade_test.go:5: use1-a had no endpoints\n"}
{"Action":"fail","Package":"example.com/a","Test":"TestUpgrade/Memory","Elapsed":1}
{"Action":"pass","Package":"example.com/a","Test":"TestUpgrade/TLS","Elapsed":1}
{"Action":"fail","Package":"example.com/a","Test":"TestUpgrade","Elapsed":2}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"    ok_test.go:9: a log\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":1}
{"Action":"fail","Package":"example.com/a","Test":"TestQuiet","Elapsed":1}
`
	r, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []failure{
		{Package: "example.com/a", Test: "TestUpgrade/Memory", lines: []string{"upgrade_test.go:2: two", "upgrade_test.go:3: three", "upgrade_test.go:4: four", "upgrade_test.go:5: use1-a had no endpoints"}},
		{Package: "example.com/a", Test: "TestQuiet"},
	}
	if d := cmp.Diff(want, r.failed, cmp.AllowUnexported(failure{})); d != "" {
		t.Errorf("failures (-want +got):\n%s", d)
	}
}
