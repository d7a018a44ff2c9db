package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestCommandLines: the four binaries follow one convention: --help exits 0 and lists the
// flags on stdout, a usage error (flag, value or command) exits 2 and names what is wrong,
// --version names the commit, every binary prints shell completion, a renamed flag's
// earlier name says it is deprecated, and every server takes --log-format.
func TestCommandLines(t *testing.T) {
	type run struct {
		args []string
		code int
		want string
	}
	common := func(bad ...string) []run {
		return []run{
			{[]string{"--help"}, 0, "--log-level"},
			{[]string{"--version"}, 0, "(commit "},
			{[]string{"--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
			{[]string{"no-such-command"}, 2, `unknown command "no-such-command"`},
			{[]string{"completion", "bash"}, 0, "bash completion"},
			{[]string{"completion", "tcsh"}, 2, `completion "tcsh": must be bash, zsh, fish or powershell`},
			{append([]string{"--log-format=xml"}, bad...), 2, `--log-format: "xml" must be json or text`},
		}
	}
	for name, runs := range map[string][]run{
		"mcs-registry": append(common(),
			run{[]string{"--max-watches=0"}, 2, "--max-watches: 0 must be at least 1"},
			run{[]string{"--client-burst=100"}, 2, "--client-burst: 100 must be at least 1025, the cost of the largest request (--max-request-bytes 16777216"},
			run{[]string{"--client-rate=-1"}, 2, "--client-rate: -1 must be 0 (no limit) or more"},
			run{[]string{"--store=nope"}, 2, "--store"},
			run{[]string{"--replication-heartbeat-interval=10ms"}, 2, "--replication-heartbeat-interval: 10ms must be 0 (no heartbeats) or between 500ms and 1m"},
			run{[]string{"--replication-stall-hold=2h"}, 2, "--replication-stall-hold: 2h0m0s must be between 0 (no hold) and 1h"},
			run{[]string{"--dynamodb-max-requests=-1"}, 2, "--dynamodb-max-requests: -1 must be between 0 (no bound) and 100000"},
			run{[]string{"--store=dynamodb", "--dynamodb-table=t", "--max-exports-per-cluster=3001"}, 2, "--max-exports-per-cluster: 3001 is more than 3000, the most with --store=dynamodb"}),
		"mcs-controller": append(common("--registry-url=https://r:9090"),
			run{[]string{"--registry-url=https://r:9090", "--import-workers=0"}, 2, "--import-workers 0: must be between 1 and 64"},
			run{[]string{"--registry-url=https://r:9090", "--canary-interval=100ms"}, 2, "--canary-interval 100ms: must be 0 (no canary) or between 1s and 10m"},
			run{[]string{"--registry-url=https://r:9090", "--registry-health-interval=1ms"}, 2, "--registry-health-interval 1ms: must be 0 (no health checks) or at least 100ms"},
			run{[]string{"--registry-url=https://r:9090", "--registry-health-timeout=0s"}, 2, "--registry-health-timeout 0s: must be at least 100ms"},
			run{[]string{"cleanup", "--help"}, 0, "--leader-election-id"},
			run{[]string{"cleanup", "--wait=soon"}, 2, "--wait"}),
		"global-discovery-service": append(common("--router-namespace=n", "--router-service=r", "--router-port-name=http"),
			run{[]string{"--pool-discovery=consul"}, 2, `pool discovery "consul": must be mcs or karmada`}),
		"mcs-admin": {
			{[]string{"--help"}, 0, "--registry-tls-ca-file"},
			{[]string{"--version"}, 0, "(commit "},
			{[]string{"--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
			{[]string{"describe"}, 2, `required flag(s) "clusterset-id" not set`},
			{[]string{"no-such-command"}, 2, `unknown command "no-such-command"`},
			{[]string{"completion", "zsh"}, 0, "zsh completion"},
			{[]string{"--registry-url=localhost:8080", "describe", "--clusterset-id=prod"}, 2, "Flag --registry-url is deprecated, use --registry-rest-url"},
		},
	} {
		bin := harness.Binary(t, name)
		for _, r := range runs {
			cmd := exec.Command(bin, r.args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if exit, ok := err.(*exec.ExitError); ok {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out := stdout.String()
			if r.code != 0 {
				out = stderr.String()
			}
			if code != r.code || !strings.Contains(out, r.want) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit %d with %q", name, strings.Join(r.args, " "), code, stdout.String(), stderr.String(), r.code, r.want)
			}
		}
	}
}
