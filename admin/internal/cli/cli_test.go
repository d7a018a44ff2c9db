package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagChecks: flags that name two places to work on, or TLS files without a registry,
// are refused before anything is dialled.
func TestFlagChecks(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--store=memory", "describe", "--clusterset=prod"}, `--store "memory": mcs-admin works on the dynamodb table directly; a memory store lives inside one mcs-registry process: reach it with --registry-url`},
		{[]string{"--registry-url=http://localhost:1", "--table=t", "describe", "--clusterset=prod"}, "--table: names a DynamoDB table, but --registry-url works through a running registry"},
		{[]string{"--registry-url=http://localhost:1", "--region=us-east-1", "describe", "--clusterset=prod"}, "--region: names a DynamoDB table"},
		{[]string{"--registry-url=http://localhost:1", "--store=dynamodb", "describe", "--clusterset=prod"}, "--store: names a DynamoDB table"},
		{[]string{"--registry-ca-file=ca.crt", "describe", "--clusterset=prod"}, "--registry-ca-file: only used with --registry-url"},
		{[]string{"--registry-url=http://localhost:1", "create-table"}, "--registry-url: create-table works on DynamoDB directly"},
		{[]string{"--registry-url=localhost:8080", "describe", "--clusterset=prod"}, `--registry-url "localhost:8080": must be like https://`},
		{[]string{"--registry-url=http://localhost:1", "delete-cluster", "--clusterset=prod", "--cluster=a"}, "add --yes to do it"},
		{[]string{"--registry-url=http://localhost:1", "describe", "--clusterset=prod", "-o", "xml"}, `-o "xml": must be table, json or yaml`},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		if code := Main(tc.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("mcs-admin %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.wantErr)
		}
	}
}
