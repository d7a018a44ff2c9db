// Package diagnose checks a clusterset from outside: each member cluster through its
// kubeconfig context, and the registry through its REST port. Every check gives OK, WARN
// or FAIL, what it found, and for anything but OK the fix.
package diagnose

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Status is a check's outcome.
type Status string

// The outcomes, from best to worst.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Result is one check of one cluster (or of the registry).
type Result struct {
	// Target is a member cluster's kubeconfig context, or "registry".
	Target string `json:"target"`
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Detail is what the check found.
	Detail string `json:"detail"`
	// Fix says what to do; empty when the status is OK.
	Fix string `json:"fix,omitempty"`
}

// Report is every result of one run.
type Report struct {
	Time    time.Time `json:"time"`
	Results []Result  `json:"results"`
}

// NotOK counts the checks that did not pass (WARN or FAIL).
func (r Report) NotOK() int {
	n := 0
	for _, res := range r.Results {
		if res.Status != OK {
			n++
		}
	}
	return n
}

// Write prints the report as a table or, with format "json", as JSON.
func (r Report) Write(w io.Writer, format string) error {
	if format == "json" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCHECK\tSTATUS\tDETAIL")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Target, res.Check, res.Status, res.Detail)
		if res.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", res.Fix)
		}
	}
	return tw.Flush()
}
