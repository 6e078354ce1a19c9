package main

import (
	"bytes"
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
		{errors.Join(errInterrupted, nil), "hbgrun: interrupted\n"},
		{errors.Join(errors.Join(errInterrupted, nil), lost), "hbgrun: no span could be exported\nhbgrun: interrupted\n"},
	} {
		var b bytes.Buffer
		if code := exitCode(tc.err, &b); code != exitInterrupted || b.String() != tc.want {
			t.Errorf("exitCode(%v): %d, %q; want %d, %q", tc.err, code, b.String(), exitInterrupted, tc.want)
		}
	}
}
