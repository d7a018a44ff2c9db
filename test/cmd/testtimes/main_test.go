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
