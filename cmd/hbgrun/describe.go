package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/stages"
)

func init() {
	commands = append(commands, &cobra.Command{
		Use:   "describe FILE",
		Short: "Print a Definition or a run image as an annotated tree",
		Long: `describe reads FILE, a Definition image (as written by run --images, or
objects/*.hbgd in a store) or a run image (run --images), told apart by
their magic, and prints it as a tree: the header as the bytes say it
(magic, version, lengths, counts, section offsets, the content hash and
whether it verifies), then what it decodes to. A Definition: its key,
boundary signature, external dependency slots, internal roots and nodes,
each with its fanin and fanout, tensor templates and where each comes from
at replay, scalars and predicate. A run image: the roots it creates, its
tasks with their args, scalars, fanin and predicates, its Graph submissions
and its pools. The byte layout is documented in package imagefmt
(go doc github.com/hbg-dev/hbg/stages/imagefmt).

A file that is no image (or cannot be read) exits 2; a bad image (cut
short, another format version, a content hash that does not verify, a
section or index out of place) prints what it can and exits 1. An image
whose only fault is its content hash is described in full first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := readInput(args[0], "an image", maxImageBytes)
			if err != nil {
				return usageError{err}
			}
			if err := stages.DescribeImage(c.OutOrStdout(), b); err != nil {
				err = fmt.Errorf("%s: %w", args[0], err)
				if len(b) < 4 || (string(b[:4]) != stages.DefinitionMagic && string(b[:4]) != stages.RunImageMagic) {
					return usageError{err}
				}
				return err
			}
			return nil
		},
	})
}
