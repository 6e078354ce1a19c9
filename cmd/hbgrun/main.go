// Command hbgrun drives hbg on a model config: validate it, expand it into the
// reference trace format, run it (host path, Graph pipeline and simulated
// device) and compare its forms.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes: a failed run exits 1, a user's mistake 2 and a run stopped by
// SIGINT or SIGTERM 130, as a shell reports a command killed by SIGINT.
const (
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// usageError marks a user's mistake (bad flag, bad model, unwritable output
// path): exit code 2, no stack trace.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// runError marks an error a command's RunE returned (a failed run). Every
// other error out of cobra is cobra's own (unknown command or flag, a flag's
// bad value, a wrong argument count), and so a usage error.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// errInterrupted is returned by a command stopped by a signal once it has
// reported what it measured.
var errInterrupted = errors.New("interrupted")

// interruption is errInterrupted when no pass had ended: no report is
// written, so stderr says so with the count a script can tell from a
// report lost (FINDINGS.md F16).
type interruption struct{ ended, total int }

func (i *interruption) Error() string {
	return fmt.Sprintf("interrupted: %d of %d passes ended", i.ended, i.total)
}

func (i *interruption) Is(target error) bool { return target == errInterrupted }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, os.Args[1:], os.Stdout, os.Stderr, stop)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// execute runs the command line. unnotify, called on the first signal,
// restores the default action, so a second Ctrl-C kills at once.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, unnotify func()) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	go func() {
		<-ctx.Done()
		unnotify()
	}()
	return root.ExecuteContext(ctx)
}

// exitCode reports err on stderr, once, and gives the exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errInterrupted) {
		// What else went wrong on the way out (spans that could not be
		// exported, an output not written) is said before it.
		for _, e := range besides(err, errInterrupted) {
			fmt.Fprintln(stderr, "hbgrun:", e)
		}
		msg := errInterrupted.Error()
		if in := (*interruption)(nil); errors.As(err, &in) {
			msg = in.Error()
		}
		fmt.Fprintln(stderr, "hbgrun:", msg)
		return exitInterrupted
	}
	fmt.Fprintln(stderr, "hbgrun:", err)
	var ue usageError
	var re runError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &re):
		return exitFailed
	}
	return exitUsage
}

// besides is the errors joined with target in err (errors.Join, at any
// depth), target's own branches left out.
func besides(err, target error) []error {
	if !errors.Is(err, target) {
		return []error{err}
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, besides(e, target)...)
	}
	return out
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "hbgrun",
		Short:         "Run a model config on hbg's Graph-recording task runtime",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// No MODEL or command: the help. Anything else is not a command.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(c, args[0])
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SetVersionTemplate("hbgrun {{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	// --version is a long flag only: -v is --verbose wherever a command
	// has it (cobra gives the root -v for --version unless the flag is
	// there already).
	root.Flags().Bool("version", false, "print hbgrun's version")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", flagWords(c, err), c.CommandPath())}
	})
	for _, c := range commands {
		markErrors(c)
		root.AddCommand(c)
	}
	conventions(root)
	return root
}

// markErrors makes c's argument errors usage errors and the errors its
// RunE returns failed runs, and its subcommands' (store ls, verify, gc)
// likewise.
func markErrors(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				if sub := unknownSubcommand(c, a); sub != nil {
					err = sub
				}
				return usageError{fmt.Errorf("%s: %w (usage: %s)", strings.TrimPrefix(c.CommandPath(), "hbgrun "), err, c.UseLine())}
			}
			return nil
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var ue usageError
			if err == nil || errors.As(err, &ue) || errors.Is(err, errInterrupted) {
				return err
			}
			return runError{err}
		}
	}
	for _, sub := range c.Commands() {
		markErrors(sub)
	}
}

// maxTasksFlag and maxEdgesFlag are the running command's --max-tasks and
// --max-edges, given to each model it interprets (loadModel, and the
// nodes' and the driver's remote configs).
var maxTasksFlag, maxEdgesFlag int64

// addMaxTasks gives a command that interprets a model (run, compare, expand,
// validate, node) its bounds on a pass, --max-tasks and --max-edges; the
// others would take them and ignore them.
func addMaxTasks(c *cobra.Command) {
	c.Flags().Var(passBound{&maxTasksFlag, "tasks", "max_tasks"}, "max-tasks", "refuse a pass of more device tasks than this (0, the default: the model's max_tasks, else 4194304)")
	c.Flags().Var(passBound{&maxEdgesFlag, "dependency edges", "max_edges"}, "max-edges", "refuse a pass whose run image, or one of whose Definitions, has more dependency edges than this (0, the default: the model's max_edges, else 16777216)")
}

// passBound is --max-tasks or --max-edges: a count, or 0 for the model's
// own bound; a negative bound is a mistake, refused as the flag is parsed.
type passBound struct {
	v         *int64
	what, key string
}

func (b passBound) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b passBound) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	switch {
	case err != nil:
		return fmt.Errorf("want a count of %s: %w", b.what, err)
	case n < 0:
		return fmt.Errorf("want 0 (the model's %s) or more %s", b.key, b.what)
	}
	*b.v = n
	return nil
}

func (passBound) Type() string { return "int" }

// commands is filled by each subcommand's file in its init.
var commands []*cobra.Command

func init() {
	commands = append(commands, &cobra.Command{
		Use:   "version",
		Short: "Print hbgrun's version (module version, commit, Go version)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), "hbgrun", version())
			return err
		},
	})
}

// version is the build's: the module version (a tagged `go install` gives
// v1.2.3; a build in the work tree gives (devel)), then the VCS revision and
// whether the tree was modified, when the build recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + modified
	}
	return v + " " + bi.GoVersion
}
