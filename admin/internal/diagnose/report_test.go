package diagnose

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestClockResult(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 10, 400_000_000, time.UTC)
	tests := []struct {
		name string
		date time.Time // the server's Date header, whole seconds
		want Status
	}{
		{"same second", t0.Truncate(time.Second), OK},
		{"two seconds ahead", t0.Truncate(time.Second).Add(2 * time.Second), OK},
		{"five seconds behind", t0.Truncate(time.Second).Add(-5 * time.Second), Warn},
		{"a minute ahead", t0.Truncate(time.Second).Add(time.Minute), Warn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := clockResult("c", tc.date, t0, t0.Add(200*time.Millisecond))
			if r.Status != tc.want || (r.Status != OK) != (r.Fix != "") {
				t.Fatalf("%+v, want %s with a fix unless OK", r, tc.want)
			}
		})
	}
}

func TestExpiryResult(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		left time.Duration
		want Status
	}{
		{"a year left", 365 * 24 * time.Hour, OK},
		{"a week left", 7 * 24 * time.Hour, Warn},
		{"expired", -time.Hour, Fail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &x509.Certificate{Subject: pkix.Name{CommonName: "mcs-registry"}, NotAfter: now.Add(tc.left)}
			r := expiryResult(Result{Check: "certificate"}, c, now, "renew it")
			if r.Status != tc.want || !strings.Contains(r.Detail, "mcs-registry") || (r.Status != OK) != (r.Fix != "") {
				t.Fatalf("%+v, want %s", r, tc.want)
			}
		})
	}
}

func TestReportWrite(t *testing.T) {
	r := Report{Time: time.Unix(0, 0).UTC(), Results: []Result{
		{Target: "use1-a", Check: "crds", Status: OK, Detail: "fine"},
		{Target: "usw2-a", Check: "permissions", Status: Fail, Detail: "may not: list services.core", Fix: "install the RBAC"},
	}}
	if r.NotOK() != 1 {
		t.Fatalf("NotOK = %d, want 1", r.NotOK())
	}
	var table bytes.Buffer
	if err := r.Write(&table, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TARGET", "use1-a", "usw2-a", "FAIL", "fix: install the RBAC"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := r.Write(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != 2 || back.Results[1].Fix != "install the RBAC" || back.Results[0].Fix != "" {
		t.Fatalf("json round trip: %v %+v\n%s", err, back, js.String())
	}
}

func TestLimit(t *testing.T) {
	if got := limit([]string{"a", "b"}); len(got) != 2 {
		t.Fatalf("limit of 2 = %v", got)
	}
	got := limit([]string{"1", "2", "3", "4", "5", "6", "7"})
	if len(got) != 6 || got[5] != "and 2 more" {
		t.Fatalf("limit of 7 = %v", got)
	}
}

func TestSkewResult(t *testing.T) {
	tests := []struct {
		controller, registry string
		want                 Status
	}{
		{"v1.4.2", "v1.4.0", OK},
		{"v1.3.9", "v1.4.0", OK},
		{"v1.5.0", "v1.4.0", OK},
		{"v1.2.0", "v1.4.0", Fail},
		{"v2.0.0", "v1.9.0", Fail},
		{"6ce8b72", "6ce8b72", OK},
		{"6ce8b72", "0a99f03", Warn},
		{"v1.4.0-rc.1", "v1.4.0", Warn},
		{"", "v1.4.0", Warn},
		{"v1.4.0", "", Warn},
	}
	for _, tc := range tests {
		r := skewResult("c", tc.controller, tc.registry)
		if r.Status != tc.want || (r.Status != OK) != (r.Fix != "") {
			t.Errorf("controller %q, registry %q: %+v, want %s", tc.controller, tc.registry, r, tc.want)
		}
	}
}
