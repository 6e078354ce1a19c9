package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
)

func init() {
	commands = append(commands, &cobra.Command{
		Use:   "describe FILE",
		Short: "Print a Definition, a run image or a store's pack as an annotated tree",
		Long: `describe reads FILE, a Definition image (as written by run --images), a run
image (run --images) or a store's pack (packs/*.hbgp: the Definitions one
batch stored, each described after its entry), told apart by their magic,
and prints it as a tree: the header as the bytes say it
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
			if len(b) >= 4 && string(b[:4]) == diskstore.PackMagic {
				return describePack(c.OutOrStdout(), args[0], b)
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

// describePack prints a store's pack: each record's entry, then its image
// as describe prints a Definition. A pack whose table does not read exits
// 1; so does one with a bad record or image, once every record is printed.
func describePack(out io.Writer, path string, b []byte) error {
	recs, err := diskstore.ReadPack(b)
	if err != nil {
		return fmt.Errorf("%s: pack: %w", path, err)
	}
	fmt.Fprintf(out, "pack, %d bytes, %d records\n", len(b), len(recs))
	var errs []error
	for i, r := range recs {
		e := r.Entry
		fmt.Fprintf(out, "\nrecord %d at %d: full_key %s, key %q, model %q, image format v%d, %d bytes, content hash %s\n",
			i, r.Offset, e.FullKey, e.Key, e.Model, e.Version, e.Bytes, e.Hash)
		if r.Problem != "" {
			fmt.Fprintf(out, "bad record: %s\n", r.Problem)
			errs = append(errs, fmt.Errorf("%s: record %d: %s", path, i, r.Problem))
			continue
		}
		if err := stages.DescribeImage(out, r.Image); err != nil {
			errs = append(errs, fmt.Errorf("%s: record %d: %w", path, i, err))
		}
	}
	return errors.Join(errs...)
}
