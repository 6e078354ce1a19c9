package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestExitCodeInterrupted: an interrupted command says what else failed on
// its way out (errors joined with the interrupt, at any depth), then that
// it was interrupted, and exits 130.
func TestExitCodeInterrupted(t *testing.T) {
	lost := errors.New("no span could be exported")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errInterrupted, "hbgrun: interrupted\n"},
		{&interruption{0, 40}, "hbgrun: interrupted: 0 of 40 passes ended\n"},
		{errors.Join(&interruption{0, 2}, lost), "hbgrun: no span could be exported\nhbgrun: interrupted: 0 of 2 passes ended\n"},
		{errors.Join(errInterrupted, nil), "hbgrun: interrupted\n"},
		{errors.Join(errors.Join(errInterrupted, nil), lost), "hbgrun: no span could be exported\nhbgrun: interrupted\n"},
	} {
		var b bytes.Buffer
		if code := exitCode(tc.err, &b); code != exitInterrupted || b.String() != tc.want {
			t.Errorf("exitCode(%v): %d, %q; want %d, %q", tc.err, code, b.String(), exitInterrupted, tc.want)
		}
	}
}

// TestInterruptedBeforeAPass: a run interrupted before any pass ended
// writes no report and says how many of its passes ended (0 of rounds ×
// ranks), so a script can tell it from a report lost (FINDINGS.md F16).
func TestInterruptedBeforeAPass(t *testing.T) {
	f := testFlags(t, "--form", "full", "--rounds", "3", "--ranks", "2", "--skip-device", "--store", "off")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	err := runCmd(ctx, &stdout, &stderr, "", f)
	var in *interruption
	if !errors.As(err, &in) || in.ended != 0 || in.total != 6 || !errors.Is(err, errInterrupted) {
		t.Fatalf("got %v, want an interruption of 0 of 6 passes", err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("a report was written: %q", stdout.String())
	}
}
