// Command hbgrun drives hbg on a model config: validate it, expand it into the
// reference trace format, run it (host path, Graph pipeline and simulated
// device) and compare its forms.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/config"
)

// usageError marks a user's mistake (bad flag, bad model): exit code 2, no
// stack trace.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	root := &cobra.Command{
		Use:           "hbgrun",
		Short:         "Run a model config on hbg's Graph-recording task runtime",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Int64Var(&config.MaxTasksOverride, "max-tasks", 0, "refuse a pass of more device tasks than this (default: the model's max_tasks, else 4194304)")
	root.AddCommand(commands...)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hbgrun:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// commands is filled by each subcommand's file in its init.
var commands []*cobra.Command
