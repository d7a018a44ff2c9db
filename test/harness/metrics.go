package harness

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// MetricIn finds one series in a Prometheus text exposition (see Metric): its labels are
// compared as a set, with their values unescaped.
func MetricIn(text, series string) (float64, error) {
	name, want, err := parseSeries(series)
	if err != nil {
		return 0, err
	}
	families, err := parseExposition(text)
	if err != nil {
		return 0, err
	}
	for _, m := range families[name].GetMetric() {
		if maps.Equal(labelsOf(m), want) {
			return valueOf(m), nil
		}
	}
	return 0, nil
}

// MetricSum adds up the series of one metric whose labels match: match is given them as
// the exposition writes them, `a="x",b="y"` in name order; nil adds every series.
func MetricSum(text, name string, match func(labels string) bool) float64 {
	families, err := parseExposition(text)
	if err != nil {
		return 0
	}
	var sum float64
	for _, m := range families[name].GetMetric() {
		if match == nil || match(labelText(m)) {
			sum += valueOf(m)
		}
	}
	return sum
}

// Sample is one series of a metric: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples returns the series of one metric in a Prometheus text exposition.
func Samples(text, name string) ([]Sample, error) {
	families, err := parseExposition(text)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, m := range families[name].GetMetric() {
		out = append(out, Sample{Labels: labelsOf(m), Value: valueOf(m)})
	}
	return out, nil
}

// parseExposition reads a Prometheus text exposition.
func parseExposition(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return families, nil
}

// parseSeries splits `name{a="x",b="y"}` into the name and the labels, read as the
// exposition format writes them.
func parseSeries(series string) (string, map[string]string, error) {
	families, err := parseExposition(series + " 0\n")
	if err != nil {
		return "", nil, fmt.Errorf("series %s: %w", series, err)
	}
	for name, f := range families {
		return name, labelsOf(f.GetMetric()[0]), nil
	}
	return "", nil, fmt.Errorf("series %s: no metric", series)
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// labelText writes a series' labels as the exposition does: `a="x",b="y"`, in name order.
func labelText(m *dto.Metric) string {
	labels := labelsOf(m)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return strings.Join(parts, ",")
}

// valueOf is a series' value: a counter's, a gauge's or an untyped one's (a histogram or
// summary series is read through its _sum and _count, which the parser folds in: those
// give the count).
func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetSummary() != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}

// Scrape returns the text of a Prometheus endpoint.
func Scrape(tb testing.TB, url string) string {
	tb.Helper()
	code, body, err := Get(url)
	if err != nil || code != http.StatusOK {
		tb.Fatalf("harness: metrics %s: %d %v", url, code, err)
	}
	return body
}

// Get is a GET's status and body, within 10 s: the plain GET every test helper makes.
func Get(url string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
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
