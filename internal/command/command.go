// Package command is the command-line convention of the project's binaries, in one place:
// cobra commands whose --help prints on standard output and exits 0, whose usage errors (a
// flag, its value, an argument, a command) exit 2 and name what is wrong, and whose
// runtime errors exit 1; --version from buildinfo; a completion command; --log-level and
// --log-format; and deprecated aliases for renamed flags.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ai-dynamo/global-discovery-mcs/internal/buildinfo"
)

// UsageError is a mistake in the command line: exit code 2.
type UsageError struct{ Err error }

func (u UsageError) Error() string { return u.Err.Error() }
func (u UsageError) Unwrap() error { return u.Err }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// AsUsage marks err, when not nil, as a usage error.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	return UsageError{err}
}

// replacedBy annotates a deprecated alias with the name that replaced it.
const replacedBy = "replaced-by"

// NewRoot returns a binary's root command: flags in the order they are defined, usage
// errors marked, --version printing the build. Args stays unset: cobra then refuses an
// argument that names no subcommand ("unknown command"), and every root has one
// (completion).
func NewRoot(name, short, long string) *cobra.Command {
	root := &cobra.Command{
		Use: name, Short: short, Long: long,
		Version:       buildinfo.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate(name + " {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	root.Flags().SortFlags = false
	root.PersistentFlags().SortFlags = false
	return root
}

// NewSub returns a subcommand with the same conventions as NewRoot.
func NewSub(use, short, long string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.NoArgs}
	cmd.Flags().SortFlags = false
	return cmd
}

// Main runs root with the process's arguments until SIGTERM or an interrupt, and exits with
// Execute's code.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := Execute(ctx, root, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Execute runs root with args and returns the exit code: 0, 1 for a runtime error, 2 for a
// usage error. Every binary gets a completion command.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	addCompletion(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A server says which deprecated flags it was given in its log (Logging.Logger), so a
	// JSON log stays all JSON; any other command says it on standard error.
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		pre := c.PreRunE
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Lookup("log-format") == nil {
				for _, d := range usedAliases(cmd) {
					fmt.Fprintf(stderr, "Flag --%s is deprecated, use --%s\n", d[0], d[1])
				}
			}
			if pre != nil {
				return pre(cmd, args)
			}
			return nil
		}
	}
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	var u UsageError
	if errors.As(err, &u) || isCobraUsage(err.Error()) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", root.Name())
		return 2
	}
	return 1
}

// isCobraUsage tells cobra's own command-line errors, which it does not type: an unknown
// command or flag, a required flag not given, flags of an exclusive group given together.
func isCobraUsage(msg string) bool {
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag(s)", "if any flags in the group",
		"accepts ", "requires at least ", "requires at most "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Alias adds old as a hidden, deprecated name of the flag name, already defined in fs:
// setting old sets name (so cobra's required flags and flag groups see name as given);
// using old works and says which name to use.
func Alias(fs *pflag.FlagSet, name, old string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("command.Alias: no flag --" + name)
	}
	fs.AddFlag(&pflag.Flag{
		Name: old, Usage: f.Usage, Value: aliasValue{Value: f.Value, fs: fs, name: name}, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal,
		Hidden: true, Annotations: map[string][]string{replacedBy: {name}},
	})
}

// aliasValue sets the flag it stands for through its flag set, which marks it changed.
type aliasValue struct {
	pflag.Value
	fs   *pflag.FlagSet
	name string
}

func (a aliasValue) Set(v string) error { return a.fs.Set(a.name, v) }

// usedAliases returns the deprecated aliases the command line used, as [old, new] pairs.
func usedAliases(cmd *cobra.Command) [][2]string {
	var used [][2]string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if to := f.Annotations[replacedBy]; len(to) == 1 {
			used = append(used, [2]string{f.Name, to[0]})
		}
	})
	return used
}

// Aliases returns the deprecated aliases of fs, old name to new name, for docs and tests.
func Aliases(fs *pflag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if to := f.Annotations[replacedBy]; len(to) == 1 {
			m[f.Name] = to[0]
		}
	})
	return m
}

// addCompletion adds "completion bash|zsh|fish|powershell", which prints a shell
// completion script. cobra adds its own only to commands that have subcommands.
func addCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			return
		}
	}
	root.CompletionOptions.DisableDefaultCmd = true
	shells := map[string]func(io.Writer) error{
		"bash":       func(w io.Writer) error { return root.GenBashCompletionV2(w, true) },
		"zsh":        root.GenZshCompletion,
		"fish":       func(w io.Writer) error { return root.GenFishCompletion(w, true) },
		"powershell": root.GenPowerShellCompletionWithDesc,
	}
	root.AddCommand(&cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print the shell completion script of " + root.Name(),
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			gen, ok := shells[args[0]]
			if !ok {
				return Usagef("completion %q: must be bash, zsh, fish or powershell", args[0])
			}
			return gen(cmd.OutOrStdout())
		},
	})
}

// Logging is the --log-level and --log-format flags.
type Logging struct {
	Level, Format string
}

// AddFlags defines the flags in fs.
func (l *Logging) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.Level, "log-level", "info", "Log level: debug, info, warn or error.")
	fs.StringVar(&l.Format, "log-format", "json", "Log format: json or text.")
}

// Logger returns the process's logger, writing to w, every record naming the version; an
// unknown level or format is a usage error. It logs a warning for each deprecated flag
// name cmd was given.
func (l *Logging) Logger(cmd *cobra.Command, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, Usagef("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch l.Format {
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	default:
		return nil, Usagef("--log-format: %q must be json or text", l.Format)
	}
	log = log.With("version", buildinfo.Version)
	for _, d := range usedAliases(cmd) {
		log.Warn("a deprecated flag name was used", "flag", "--"+d[0], "use", "--"+d[1])
	}
	return log, nil
}
