package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/refwriter"
)

func init() {
	var form, out string
	cmd := &cobra.Command{
		Use:   "expand MODEL --form FORM [--out FILE]",
		Short: "Write a model's submission sequence in the reference trace format",
		Long: `expand interprets MODEL in the given form on the ordinary submit path and
writes every task (arguments, scalars, explicit deps, fanin from the
TensorMap), scope and Graph event as JSON lines, then a summary line.
Graph bodies are expanded inline; their tasks carry the graph field and
their arguments the boundary slot they come from. A FILE ending in .gz is
gzip-compressed; without --out the trace goes to standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := loadModel(args[0])
			if err != nil {
				return err
			}
			if form == "" {
				return usageError{fmt.Errorf("--form is required (want one of %s)", strings.Join(m.Forms(), ", "))}
			}
			if err := autoForm(cmd.Context(), m, []string{form}, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if !slices.Contains(m.Forms(), form) {
				return usageError{fmt.Errorf("model %s has no form %q (want one of %s)", m.Name, form, strings.Join(m.Forms(), ", "))}
			}
			return writeExpansion(m, form, out, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&form, "form", "", "form to expand (eager, pair, blocks, full, ...)")
	cmd.Flags().StringVar(&out, "out", "", "output file (.gz compresses); default standard output")
	addMaxTasks(cmd)
	commands = append(commands, cmd)
}

// writeExpansion writes the trace of one form to out (or stdout).
func writeExpansion(m *config.Model, form, out string, stdout io.Writer) (err error) {
	w := stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return usageError{fmt.Errorf("--out: %w", err)}
		}
		defer func() {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
		w = f
		if strings.HasSuffix(out, ".gz") {
			zw := gzip.NewWriter(f)
			defer func() {
				if cerr := zw.Close(); err == nil {
					err = cerr
				}
			}()
			w = zw
		}
	}
	tw := refwriter.New(w, m.EntryRoots(), m.Kernels())
	if err := m.Run(tw, form); err != nil {
		return usageError{err}
	}
	return tw.Close()
}
