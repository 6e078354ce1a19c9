package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/trace"
)

// storeFlags are --store and --store-max, which run, compare and store
// share. The store's default is $HBG_STORE when set (tests set it to off,
// so they never write into the user's cache), else diskstore.DefaultDir().
type storeFlags struct {
	flag    string
	maxFlag string
	// dir and max are the resolved values; dir "" means no store.
	dir string
	max int64
}

func (f *storeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.flag, "store", "", "the Definition store on disk: a directory, or off (default $HBG_STORE, else the user cache's hbg/definitions)")
	fl.StringVar(&f.maxFlag, "store-max", "1GiB", "the store's size limit; least recently used Definitions are evicted beyond it")
}

func (f *storeFlags) resolve() error {
	if err := f.resolveDir(); err != nil {
		return err
	}
	if f.dir != "" {
		// Opened once here, so that a store that cannot be made or read
		// is the flag's mistake before any work (a node would otherwise
		// serve and fail every placement).
		s, err := diskstore.Open(f.dir, f.max)
		if err != nil {
			return usageError{fmt.Errorf("--store %s: %w", f.dir, err)}
		}
		s.Close()
	}
	return nil
}

// resolveDir sets dir and max from the flags and $HBG_STORE.
func (f *storeFlags) resolveDir() error {
	max, err := diskstore.ParseSize(f.maxFlag)
	if err != nil {
		return usageError{fmt.Errorf("--store-max: %w", err)}
	}
	f.max = max
	dir := f.flag
	if dir == "" {
		dir = os.Getenv("HBG_STORE")
	}
	switch dir {
	case "off":
		f.dir = ""
	case "":
		if f.dir, err = diskstore.DefaultDir(); err != nil {
			return usageError{fmt.Errorf("--store: %w; name a directory, or off", err)}
		}
	default:
		f.dir = dir
	}
	return nil
}

// open opens the store for the store subcommands, which need one there
// already: a listing makes no directory (a mistyped --store is said, not
// created).
func (f *storeFlags) open() (*diskstore.Store, error) {
	if err := f.resolveDir(); err != nil {
		return nil, err
	}
	if f.dir == "" {
		return nil, usageError{fmt.Errorf("--store off: the store command needs a store")}
	}
	if _, err := os.Stat(f.dir); err != nil {
		return nil, usageError{fmt.Errorf("--store %s: no store there (%w; a run makes one)", f.dir, err)}
	}
	s, err := diskstore.Open(f.dir, f.max)
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

func init() {
	var f storeFlags
	c := &cobra.Command{
		Use:   "store",
		Short: "List, verify or shrink the Definition store on disk",
		Long: `Definitions outlive the process in a store on disk shared by every hbgrun
on the machine: a fresh process replays what an earlier one recorded.
  ls      every Definition: key, model, size, last use (most recent first)
  verify  check every image (exit 1 when one is bad; a run moves bad ones aside),
          and each signature kept beside an image fetched signed from another
          node: its signer (certificate subject, serial), checked over the
          image and, with --trusted-ca-file, against the cluster's CA (exit 1
          when one does not verify: a load then does not take it as signed)
  gc      remove leftovers and evict the least recently used down to --store-max`,
		// A command with subcommands runs nothing itself: without these,
		// cobra prints the help for a mistyped subcommand and exits 0.
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	f.register(c.PersistentFlags())
	var sf sigFlags
	sub := func(use, short string, fn func(context.Context, io.Writer, *diskstore.Store) error) *cobra.Command {
		sc := &cobra.Command{
			Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				if err := sf.load(); err != nil {
					return err
				}
				s, err := f.open()
				if err != nil {
					return err
				}
				defer s.Close()
				err = fn(c.Context(), c.OutOrStdout(), s)
				if errors.Is(err, context.Canceled) {
					return errInterrupted
				}
				return err
			},
		}
		c.AddCommand(sc)
		return sc
	}
	sub("ls", "List every Definition in the store", storeLs)
	sf.register(sub("verify", "Check every image in the store, and the signatures kept beside them", func(ctx context.Context, out io.Writer, s *diskstore.Store) error {
		return storeVerify(ctx, out, s, &sf)
	}).Flags())
	sub("gc", "Evict least recently used Definitions down to --store-max", storeGC)
	commands = append(commands, c)
}

func storeLs(_ context.Context, out io.Writer, s *diskstore.Store) error {
	list, err := s.List()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tMODEL\tSIZE\tLAST USE\tFULL_KEY\tHASH")
	var total int64
	for _, e := range list {
		total += e.Bytes
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Key, e.Model, humanBytes(e.Bytes), e.LastUse.Format(time.DateTime), e.FullKey, e.Hash)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s, %s of images in %s (limit %s)\n", trace.Plural(int64(len(list)), "Definition"), humanBytes(total), s.Dir(), humanBytes(s.Max()))
	return err
}

func storeVerify(ctx context.Context, out io.Writer, s *diskstore.Store, sf *sigFlags) error {
	r, err := s.VerifyContext(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "bad: %s: %s\n", p.Path, p.Reason)
	}
	badSigs := sf.reportSigned(&b, r.Signed)
	fmt.Fprintf(&b, "%d packs, %d entries, %d images, %s: %d bad; %s; %d duplicate packs, %d temporary files, %d quarantined files, %d files of the old layout (gc removes them)\n",
		r.Packs, r.Entries, r.Images, humanBytes(r.Bytes), len(r.Problems), sigSummary(r.Signed, len(badSigs)), r.Shadowed, r.Temp, r.Quarantined, r.Legacy)
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	if len(r.Problems) > 0 || len(badSigs) > 0 {
		return fmt.Errorf("store %s: %d bad packs or records, %d %w", s.Dir(), len(r.Problems), len(badSigs), errBadSignatures)
	}
	return nil
}

func storeGC(ctx context.Context, out io.Writer, s *diskstore.Store) error {
	r, err := s.GCContext(ctx, 0)
	if err != nil {
		return err
	}
	for _, e := range r.Evicted {
		fmt.Fprintf(out, "evicted %s %s (%s, last used %s)\n", e.Key, e.Model, humanBytes(e.Bytes), e.LastUse.Format(time.DateTime))
	}
	_, err = fmt.Fprintf(out, "%s -> %s (limit %s): %d evicted, %d packs pinned by a running pass; removed %d duplicate packs, %d temporary files, %d quarantined files, %d files of the old layout, %d unreadable packs, %d packs with an image the device refuses (their good Definitions kept)\n",
		humanBytes(r.Before), humanBytes(r.After), humanBytes(s.Max()), len(r.Evicted), r.Pinned, r.Shadowed, r.Temp, r.Quarantined, r.Legacy, r.BadPacks, r.Unreadable)
	return err
}
