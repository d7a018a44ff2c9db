package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/version"
)

// ParseFlags parses args; done means the process exits with code (--help: 0 after the flags
// are printed on stdout; a usage error: 2).
func ParseFlags(fs *pflag.FlagSet, about string, args []string) (done bool, code int) {
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return false, 0
	case errors.Is(err, pflag.ErrHelp):
		fmt.Printf("%s\n\nUsage:\n  %s [flags]\n\nFlags:\n%s", about, fs.Name(), fs.FlagUsages())
		return true, 0
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for the flags.\n", fs.Name(), err, fs.Name())
		return true, 2
	}
}

// NewLogger is the process's logger; an unknown format or level is a usage error.
func NewLogger(format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)).With("version", version.Version), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)).With("version", version.Version), nil
	}
	return nil, fmt.Errorf("--log-format: %q must be json or text", format)
}

// RouteLogs sends every log of the process through log: controller-runtime's, and klog's
// (client-go and leader election log through klog, which otherwise writes its own text
// lines to stderr, between the JSON ones).
func RouteLogs(log *slog.Logger) {
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	klog.SetSlogLogger(log)
}
