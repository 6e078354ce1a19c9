package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/analyze"
	"github.com/hbg-dev/hbg/config"
)

func init() {
	var form string
	cmd := &cobra.Command{
		Use:   "validate MODEL",
		Short: "Load a model config, run every form and the static Graph checks",
		Long: `validate loads MODEL (schema, names, kernels, expressions, explicit
dependencies), interprets every form (views inside their roots, shapes,
predicates) and runs the static Graph checks: a Graph body whose structure
depends on a param outside its key, a scalar computed from a boundary
scalar, and two blocks whose Graph keys in one form can be the same text.
It prints a one-line summary; any error exits with status 2.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := loadModel(args[0])
			if err != nil {
				return err
			}
			if form != "" && form != analyze.AutoForm {
				return usageError{fmt.Errorf("--form %q: validate checks every form; --form takes only %s (the form hbgrun analyze proposes, checked with the others)", form, analyze.AutoForm)}
			}
			if err := autoForm(cmd.Context(), m, []string{form}, cmd.ErrOrStderr()); err != nil {
				return err
			}
			sum, err := validateCtx(cmd.Context(), m)
			if err != nil {
				return err
			}
			for _, w := range sum.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "hbgrun: warning: %s\n", w)
			}
			var forms []string
			for _, f := range sum.Forms {
				forms = append(forms, fmt.Sprintf("%s %d tasks/%d edges/%d submits/%d Graphs", f.Name, f.Tasks, f.Edges, f.HostSubmits, f.GraphCalls))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %d blocks, %d kernels, %d entry tensors; %s\n",
				m.Name, len(m.Blocks()), len(m.Kernels()), len(m.EntryRoots()), strings.Join(forms, ", "))
			return nil
		},
	}
	cmd.Flags().StringVar(&form, "form", "", "auto: also the form hbgrun analyze proposes (calibrated on this machine first)")
	addMaxTasks(cmd)
	commands = append(commands, cmd)
}

// validateCtx is config.Validate ended by ctx: the checks run every form
// of the model, seconds for a large one, and take no context, so they run
// on a goroutine of their own, which a signal abandons (the process exits
// just after; nothing is written). A second Ctrl-C is the same.
func validateCtx(ctx context.Context, m *config.Model) (*config.Summary, error) {
	type result struct {
		sum *config.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := config.Validate(m)
		done <- result{sum, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, usageError{r.err}
		}
		return r.sum, nil
	case <-ctx.Done():
		return nil, errInterrupted
	}
}
