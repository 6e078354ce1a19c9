package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/stages"
)

func init() {
	var sf sigFlags
	c := &cobra.Command{
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
whose only fault is its content hash is described in full first.

A pack's record of an image fetched signed from another node keeps the
recorder's signature beside it: describe names the signer (its certificate's
subject, serial, issuer and validity) and says whether the signature verifies
over the image, against the signer's own certificate or, with
--trusted-ca-file (and --revoked), against the cluster's CA; one that does not
exits 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := readInput(args[0], "an image", maxImageBytes)
			if err != nil {
				return usageError{err}
			}
			if err := sf.load(); err != nil {
				return err
			}
			if len(b) >= 4 && string(b[:4]) == diskstore.PackMagic {
				return describePack(c.OutOrStdout(), args[0], b, &sf)
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
	}
	sf.register(c.Flags())
	commands = append(commands, c)
}

// describePack prints a store's pack: each record's entry, then its image
// as describe prints a Definition. A pack whose table does not read exits
// 1; so does one with a bad record or image, once every record is printed.
func describePack(out io.Writer, path string, b []byte, sf *sigFlags) error {
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
		if err := describeSig(out, r, sf); err != nil {
			errs = append(errs, fmt.Errorf("%s: record %d: %w", path, i, err))
		}
		if err := stages.DescribeImage(out, r.Image); err != nil {
			errs = append(errs, fmt.Errorf("%s: record %d: %w", path, i, err))
		}
	}
	return errors.Join(errs...)
}

// describeSig prints a pack record's kept signature: who signed and
// whether it verifies over the record's image.
func describeSig(out io.Writer, r diskstore.PackRecord, sf *sigFlags) error {
	e := r.Entry
	fk, err := strconv.ParseUint(e.FullKey, 16, 64)
	if err != nil {
		return err
	}
	// Over the bytes there, not the hash the entry says: an image changed
	// on disk does not keep its signature.
	c := sf.check(fk, stages.DefinitionHash(r.Image), uint16(e.Version), r.Signature)
	if c.err != nil {
		fmt.Fprintf(out, "signature: %s\n", c)
		return fmt.Errorf("signature: %w", c.err)
	}
	if c.none {
		fmt.Fprintf(out, "signature: %s\n", c)
		return nil
	}
	fmt.Fprintf(out, "signature: %s; %s\n", c, sf.verdict())
	return nil
}
