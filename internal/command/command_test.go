package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// testRoot is a server-like command: a flag with a deprecated alias, logging, and a
// RunE that fails at run time when told to.
func testRoot(logs *bytes.Buffer, ran *string) *cobra.Command {
	var addr string
	var logging Logging
	root := NewRoot("demo", "demo serves.", "")
	root.Flags().StringVar(&addr, "http-addr", ":8080", "Address.")
	Alias(root.Flags(), "http-addr", "listen")
	logging.AddFlags(root.Flags())
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := logging.Logger(cmd, logs)
		if err != nil {
			return err
		}
		log.Info("serving", "addr", addr)
		*ran = addr
		if addr == "fail" {
			return errors.New("listen: no")
		}
		return nil
	}
	return root
}

func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		args                 []string
		code                 int
		stdout, stderr, logs string
		ran                  string
	}{
		{"runs", []string{"--http-addr=:1"}, 0, "", "", `"msg":"serving"`, ":1"},
		{"help", []string{"--help"}, 0, "--http-addr", "", "", ""},
		{"version", []string{"--version"}, 0, "demo dev (commit unknown", "", "", ""},
		{"unknown flag", []string{"--nope"}, 2, "", "unknown flag: --nope", "", ""},
		{"unknown command", []string{"nope"}, 2, "", `unknown command "nope"`, "", ""},
		{"bad log format", []string{"--log-format=xml"}, 2, "", `--log-format: "xml" must be json or text`, "", ""},
		{"bad log level", []string{"--log-level=loud"}, 2, "", "--log-level:", "", ""},
		{"runtime error", []string{"--http-addr=fail"}, 1, "", "demo: listen: no", "", "fail"},
		{"deprecated alias logs a warning", []string{"--listen=:2"}, 0, "", "", `"msg":"a deprecated flag name was used","version":"dev","flag":"--listen","use":"--http-addr"`, ":2"},
		{"completion", []string{"completion", "fish"}, 0, "complete -c demo", "", "", ""},
		{"completion of no shell", []string{"completion", "tcsh"}, 2, "", `completion "tcsh": must be bash`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr, logs bytes.Buffer
			ran := ""
			code := Execute(context.Background(), testRoot(&logs, &ran), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) ||
				!strings.Contains(logs.String(), tc.logs) || ran != tc.ran {
				t.Fatalf("exit %d, ran %q\nstdout %q\nstderr %q\nlogs %q\nwant exit %d, ran %q, stdout %q, stderr %q, logs %q",
					code, ran, stdout.String(), stderr.String(), logs.String(), tc.code, tc.ran, tc.stdout, tc.stderr, tc.logs)
			}
			if tc.code == 2 && !strings.Contains(stderr.String(), "Run 'demo --help' for usage.") {
				t.Fatalf("a usage error without the pointer to --help: %q", stderr.String())
			}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if line != "" && !json.Valid([]byte(line)) {
					t.Fatalf("a log line that is not JSON: %q", line)
				}
			}
		})
	}
}

// A command without logging (a CLI) warns of a deprecated alias on standard error.
func TestAliasWarnsOnStderrWithoutLogging(t *testing.T) {
	var url string
	root := NewRoot("cli", "cli.", "")
	root.PersistentFlags().StringVar(&url, "registry-rest-url", "", "URL.")
	Alias(root.PersistentFlags(), "registry-rest-url", "registry-url")
	sub := NewSub("describe", "Describe.", "")
	sub.RunE = func(*cobra.Command, []string) error { return nil }
	root.AddCommand(sub)
	var stdout, stderr bytes.Buffer
	if code := Execute(context.Background(), root, []string{"--registry-url=http://x", "describe"}, &stdout, &stderr); code != 0 || url != "http://x" {
		t.Fatalf("exit %d, url %q, stderr %q", code, url, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Flag --registry-url is deprecated, use --registry-rest-url") {
		t.Fatalf("stderr %q: no deprecation warning", stderr.String())
	}
	if got := Aliases(root.PersistentFlags()); len(got) != 1 || got["registry-url"] != "registry-rest-url" {
		t.Fatalf("Aliases = %v", got)
	}
	if strings.Contains(root.UsageString(), "--registry-url ") {
		t.Fatalf("the deprecated alias shows in the help:\n%s", root.UsageString())
	}
}
