package harness

import "testing"

func TestMetricParsing(t *testing.T) {
	text := `# HELP x_total a counter
x_total{op="put",result="success"} 3
x_total{op="put",result="failure"} 2
x_total{op="sync",result="success"} 1.5
x_totally_other 100
y 7
z{path="/a\\b",quote="say \"hi\""} 4
`
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`x_total{op="put",result="failure"}`, 2},
		{"y", 7},
		{`x_total{op="delete"}`, 0},
		// Labels are a set: their order does not matter; values are unescaped.
		{`x_total{result="failure",op="put"}`, 2},
		{`z{quote="say \"hi\"",path="/a\\b"}`, 4},
	} {
		if got, err := MetricIn(text, tc.series); err != nil || got != tc.want {
			t.Errorf("MetricIn(%s) = %v, %v; want %v", tc.series, got, err, tc.want)
		}
	}
	if got := MetricSum(text, "x_total", nil); got != 6.5 {
		t.Errorf("MetricSum(x_total) = %v, want 6.5 (x_totally_other is another metric)", got)
	}
	if got := MetricSum(text, "x_total", func(l string) bool { return l == `op="put",result="success"` || l == `op="sync",result="success"` }); got != 4.5 {
		t.Errorf("MetricSum(x_total, success) = %v, want 4.5", got)
	}
	if got := MetricSum(text, "z", func(l string) bool { return l == `path="/a\\b",quote="say \"hi\""` }); got != 4 {
		t.Errorf("MetricSum(z, escaped labels) = %v, want 4", got)
	}
	if _, err := MetricIn("x_total{op=\"put\" 3\n", "x_total"); err == nil {
		t.Error("MetricIn of a broken exposition: no error")
	}
}
