package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagChecks: flags that name two places to work on, or TLS files without a registry,
// are refused before anything is dialled, as usage errors (exit 2).
func TestFlagChecks(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--store=memory", "describe", "--clusterset=prod"}, `--store "memory": mcs-admin works on the dynamodb table directly; a memory store lives inside one mcs-registry process: reach it with --registry-rest-url`},
		{[]string{"--registry-rest-url=http://localhost:1", "--table=t", "describe", "--clusterset=prod"}, "if any flags in the group [registry-rest-url table] are set none of the others can be"},
		{[]string{"--registry-rest-url=http://localhost:1", "--region=us-east-1", "describe", "--clusterset=prod"}, "if any flags in the group [registry-rest-url region] are set none of the others can be"},
		{[]string{"--registry-url=http://localhost:1", "--store=dynamodb", "describe", "--clusterset=prod"}, "if any flags in the group [registry-rest-url store] are set none of the others can be"},
		{[]string{"--registry-ca-file=ca.crt", "describe", "--clusterset=prod"}, "--registry-tls-ca-file: only used with --registry-rest-url"},
		{[]string{"--registry-url=http://localhost:1", "create-table"}, "--registry-rest-url: create-table works on DynamoDB directly"},
		{[]string{"--registry-url=localhost:8080", "describe", "--clusterset=prod"}, `--registry-rest-url "localhost:8080": must be like https://`},
		{[]string{"--registry-url=http://localhost:1", "delete-cluster", "--clusterset=prod", "--cluster=a"}, "add --yes to do it"},
		{[]string{"--registry-url=http://localhost:1", "describe", "--clusterset=prod", "-o", "xml"}, `-o "xml": must be table, json or yaml`},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		if code := Main(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("mcs-admin %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.wantErr)
		}
	}
}

// TestExitCodes: --help exits 0, a usage mistake 2, a failure at run time 1; the earlier
// flag names still work.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		{[]string{"--help"}, 0, "Usage:"},
		{[]string{"describe", "--help"}, 0, "--clusterset-id"},
		{[]string{"--version"}, 0, "commit"},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"no-such-command"}, 2, `unknown command "no-such-command"`},
		{[]string{"describe", "extra"}, 2, "unknown command"},
		{[]string{"--registry-url=http://localhost:1", "describe"}, 2, `required flag(s) "clusterset-id" not set`},
		// The deprecated names reach the same settings: this fails dialling, at run time.
		{[]string{"--registry-url=http://127.0.0.1:1", "describe", "--clusterset=prod"}, 1, "127.0.0.1:1"},
		{[]string{"--registry-url=http://127.0.0.1:1", "delete-cluster", "--clusterset=prod", "--cluster=a", "--yes"}, 1, "127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(tc.args, &stdout, &stderr)
		if out := stdout.String() + stderr.String(); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("mcs-admin %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
	}
}
