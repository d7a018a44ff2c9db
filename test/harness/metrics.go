package harness

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Metric reads one series from a Prometheus text endpoint: series is the metric name with
// its labels as the endpoint writes them (`name{a="x",b="y"}`, or the bare name). It
// returns 0 when the series is absent (a counter not yet incremented).
func Metric(tb testing.TB, url, series string) float64 {
	tb.Helper()
	v, err := MetricIn(Scrape(tb, url), series)
	if err != nil {
		tb.Fatalf("harness: metrics %s: %v", url, err)
	}
	return v
}

// MetricIn finds one series in a Prometheus text exposition (see Metric).
func MetricIn(text, series string) (float64, error) {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("series %s: %w", series, err)
		}
		return v, nil
	}
	return 0, nil
}

// MetricSum adds up the series of one metric whose labels (the text between the braces)
// match; match nil adds every series.
func MetricSum(text, name string, match func(labels string) bool) float64 {
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		if match != nil && !match(labels) {
			continue
		}
		if f := strings.Fields(rest); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// Scrape returns the text of a Prometheus endpoint.
func Scrape(tb testing.TB, url string) string {
	tb.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		tb.Fatalf("harness: metrics %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("harness: metrics %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// CheckMetrics lints what url serves with `promtool check metrics` (names, units, types,
// help), failing the test on any finding.
func CheckMetrics(tb testing.TB, url string) {
	tb.Helper()
	cmd := exec.Command(Binary(tb, "promtool"), "check", "metrics")
	cmd.Stdin = strings.NewReader(Scrape(tb, url))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		tb.Errorf("promtool check metrics %s: %v\n%s", url, err, out)
	}
}
