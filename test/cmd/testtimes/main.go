// Command testtimes reads the `go test -json` files a `make test` run wrote (gotestsum's
// --jsonfile, one per suite) and prints where the time went: the slowest top-level tests and
// each package's wall time, then the last lines each failed test reported from its test file
// (so a run's tail says why it failed), then one line counting every test and subtest by
// result.
// `make test` prints the ten slowest at its end; `-markdown -packages` prints the tables of
// docs/development.md.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is one test's or package's result and elapsed time.
type timing struct {
	Package, Test, Result string
	Elapsed               time.Duration
}

func main() {
	top := flag.Int("top", 10, "the number of slowest tests to print (0: none)")
	packages := flag.Bool("packages", false, "also print each package's wall time")
	markdown := flag.Bool("markdown", false, "print Markdown tables")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: testtimes [-top N] [-packages] [-markdown] FILE.json...")
		os.Exit(2)
	}
	var tests, pkgs []timing
	var failed []failure
	results := map[string]int{}
	for _, name := range flag.Args() {
		r, err := readFile(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
			os.Exit(1)
		}
		tests, pkgs, failed = append(tests, r.tests...), append(pkgs, r.pkgs...), append(failed, r.failed...)
		for k, n := range r.results {
			results[k] += n
		}
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *top > 0 {
		sortSlowest(tests)
		if len(tests) > *top {
			tests = tests[:*top]
		}
		fmt.Fprintf(w, "The %d slowest tests:\n", len(tests))
		printTable(w, tests, true, *markdown)
	}
	if *packages {
		sortSlowest(pkgs)
		fmt.Fprintf(w, "Packages by wall time (%d):\n", len(pkgs))
		printTable(w, pkgs, false, *markdown)
	}
	for _, f := range failed {
		fmt.Fprintf(w, "FAIL %s (%s):\n", f.Test, short(f.Package))
		for _, l := range f.lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	// The closing line: every test and subtest, as a CI reads a runner's summary.
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", results["pass"], results["fail"], results["skip"])
}

// run is what one test2json file holds: its top-level tests, its packages, and how many
// tests and subtests ended with each result.
type run struct {
	tests, pkgs []timing
	results     map[string]int
	// failed are the failed tests that have no failed subtest, with their last reports.
	failed []failure
}

// failure is a failed test and the last lines it reported from its test file (t.Error,
// t.Fatal, and t.Log lines other than FIGUREs: test2json does not tell them apart).
type failure struct {
	Package, Test string
	lines         []string
}

// reportsKept is how many report lines of a failed test are printed, and reportWidth how
// much of each: enough to say why, not the logs.
const (
	reportsKept = 4
	reportWidth = 300
)

// report is a test's own report line: "    name_test.go:123: text", not a FIGURE.
var report = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// readFile returns the top-level tests and the packages of one test2json file. A package
// that failed to build has no pass or fail event of its own for a test; it shows as a
// package with its result.
func readFile(name string) (run, error) {
	f, err := os.Open(name)
	if err != nil {
		return run{}, err
	}
	defer f.Close()
	r, err := read(f)
	if err != nil {
		return run{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

func read(in io.Reader) (run, error) {
	r := run{results: map[string]int{}}
	reports := map[string][]string{} // by package and test, the last reportsKept
	failedSub := map[string]bool{}   // tests with a failed subtest
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // a test's output line can be long
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 || sc.Bytes()[0] != '{' {
			continue // go test's own lines (a build error) between the events
		}
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return run{}, fmt.Errorf("line %d: %w", line, err)
		}
		key := e.Package + " " + e.Test
		if e.Action == "output" && e.Test != "" && report.MatchString(e.Output) && !strings.Contains(e.Output, "FIGURE ") {
			l := strings.TrimSpace(e.Output)
			if len(l) > reportWidth {
				l = l[:reportWidth] + "…"
			}
			kept := append(reports[key], l)
			if len(kept) > reportsKept {
				kept = kept[1:]
			}
			reports[key] = kept
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		if e.Action == "fail" && e.Test != "" {
			if !failedSub[key] {
				r.failed = append(r.failed, failure{Package: e.Package, Test: e.Test, lines: reports[key]})
			}
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				failedSub[e.Package+" "+e.Test[:i]] = true
			}
		}
		delete(reports, key)
		t := timing{Package: e.Package, Test: e.Test, Result: e.Action, Elapsed: time.Duration(e.Elapsed * float64(time.Second))}
		if e.Test == "" {
			if e.Action != "skip" { // a package without tests
				r.pkgs = append(r.pkgs, t)
			}
			continue
		}
		r.results[e.Action]++
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, t)
		}
	}
	return r, sc.Err()
}

func sortSlowest(ts []timing) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Elapsed > ts[j].Elapsed })
}

func printTable(w io.Writer, ts []timing, withTest, markdown bool) {
	if markdown {
		if withTest {
			fmt.Fprintln(w, "| Test | Package | Seconds |\n|---|---|---:|")
		} else {
			fmt.Fprintln(w, "| Package | Seconds |\n|---|---:|")
		}
	}
	for _, t := range ts {
		secs := fmt.Sprintf("%.1f", t.Elapsed.Seconds())
		if t.Result != "pass" {
			secs += " (" + t.Result + ")"
		}
		switch {
		case markdown && withTest:
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", t.Test, short(t.Package), secs)
		case markdown:
			fmt.Fprintf(w, "| %s | %s |\n", short(t.Package), secs)
		case withTest:
			fmt.Fprintf(w, "  %8s s  %s (%s)\n", secs, t.Test, short(t.Package))
		default:
			fmt.Fprintf(w, "  %8s s  %s\n", secs, short(t.Package))
		}
	}
}

// short drops the module path every package of this repository shares.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/ai-dynamo/global-discovery-mcs/")
}
