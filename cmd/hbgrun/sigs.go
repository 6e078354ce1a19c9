package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/pflag"

	"github.com/hbg-dev/hbg/diskstore"
	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/trace"
)

// sigFlags are the flags that check the signatures a store keeps beside
// its images (describe, store verify): the cluster's CA and a deny list.
type sigFlags struct {
	ca, revoked string
	// v checks against the CA (nil: only each signature against its own
	// certificate); set by load.
	v *defsig.Verifier
}

func (f *sigFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.ca, "trusted-ca-file", "", "check each kept Definition signature against this cluster CA (PEM): recorder role, valid now, not revoked; without it only against the signer's own certificate")
	fl.StringVar(&f.revoked, "revoked", "", "with --trusted-ca-file: a file of revoked node certificate serials, one a line (hbgrun cluster revoked prints one)")
}

func (f *sigFlags) load() error {
	if f.ca == "" {
		if f.revoked != "" {
			return usageError{fmt.Errorf("--revoked %s: needs --trusted-ca-file (revocation is checked with the CA)", f.revoked)}
		}
		return nil
	}
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		return usageError{fmt.Errorf("--trusted-ca-file: %w", err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return usageError{fmt.Errorf("--trusted-ca-file %s: no PEM certificate in it", f.ca)}
	}
	f.v = defsig.NewVerifier(pool)
	if f.revoked != "" {
		serials, err := defsig.ReadDenyList(f.revoked)
		if err != nil {
			return usageError{fmt.Errorf("--revoked: %w", err)}
		}
		f.v.SetDenied(serials)
	}
	return nil
}

// sigCheck is what a kept signature says: who signed (nil: unsigned or
// unreadable), and why it is not good (nil: good, or unsigned).
type sigCheck struct {
	signer *x509.Certificate
	err    error
	none   bool
}

// check checks a kept signature over the Definition (fullKey, hash,
// version): against its own certificate, then the CA when given.
func (f *sigFlags) check(fullKey, hash uint64, version uint16, kept []byte) sigCheck {
	if len(kept) == 0 {
		return sigCheck{none: true}
	}
	sig, err := defsig.Decode(kept)
	if err != nil {
		return sigCheck{err: err}
	}
	leaf, err := defsig.CheckSelf(fullKey, hash, version, sig)
	if err != nil || f.v == nil {
		return sigCheck{signer: leaf, err: err}
	}
	_, err = f.v.Verify(fullKey, hash, version, sig)
	return sigCheck{signer: leaf, err: err}
}

// String says it on one line.
func (c sigCheck) String() string {
	switch {
	case c.none:
		return "unsigned (recorded by the node that stored it, or before signatures)"
	case c.signer == nil:
		return fmt.Sprintf("BAD: %v", c.err)
	case c.err != nil:
		return fmt.Sprintf("signed by %s: BAD: %v", defsig.Describe(c.signer), c.err)
	}
	return "signed by " + defsig.Describe(c.signer)
}

// verdict is what a good signature was checked against.
func (f *sigFlags) verdict() string {
	if f.v == nil {
		return "verifies over the image against the signer's own certificate (its CA not checked: give --trusted-ca-file)"
	}
	return "verified against --trusted-ca-file " + f.ca + " (recorder role, valid now, not revoked)"
}

// reportSigned prints the signatures a store verify found: the good ones
// by signer, each bad one on its own. It returns the bad ones.
func (f *sigFlags) reportSigned(out io.Writer, recs []diskstore.SignedRecord) []error {
	type signer struct {
		desc string
		n    int
	}
	good := map[string]*signer{}
	var bad []error
	for _, r := range recs {
		c := f.check(r.FullKey, r.Hash, r.Version, r.Signature)
		if c.err != nil {
			e := fmt.Errorf("%s: record of full_key %016x (key %q): signature %s", r.Path, r.FullKey, r.Key, c)
			fmt.Fprintf(out, "bad signature: %v\n", e)
			bad = append(bad, e)
			continue
		}
		k := defsig.Serial(c.signer) + "\x00" + string(c.signer.RawIssuer)
		if good[k] == nil {
			good[k] = &signer{desc: defsig.Describe(c.signer)}
		}
		good[k].n++
	}
	keys := make([]string, 0, len(good))
	for k := range good {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "signed: %s by %s: %s\n", trace.Plural(int64(good[k].n), "image"), good[k].desc, f.verdict())
	}
	return bad
}

// errBadSignatures is a store verify that found a kept signature bad.
var errBadSignatures = errors.New("kept signatures that do not verify")

// sigSummary is verify's count of signatures.
func sigSummary(recs []diskstore.SignedRecord, bad int) string {
	return fmt.Sprintf("%d signed (%s)", len(recs), trace.Plural(int64(bad), "bad signature"))
}
