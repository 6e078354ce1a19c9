package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/analyze"
)

const (
	racyModel  = "../../tests/testdata/outside/outside2_tilepipe_racy.yaml"
	emptyModel = "../../tests/testdata/outside/outside2_emptyprog.yaml"
)

// runCLI runs hbgrun with args and gives its stdout, stderr and error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := execute(context.Background(), args, &out, &errb, func() {})
	return out.String(), errb.String(), err
}

// TestFlagMistakesRefused: flag values that cannot mean what the user
// wants are usage errors (exit 2) naming only the flag given.
func TestFlagMistakesRefused(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		notWant string
	}{
		{[]string{"analyze", racyModel, "--horizon", "0"}, "--horizon 0: want at least 1", "--calibrate-rounds"},
		{[]string{"analyze", racyModel, "--calibrate-rounds", "1"}, "--calibrate-rounds 1", "--horizon"},
		{[]string{"analyze", racyModel, "--emit-form", "a b: c"}, `--emit-form "a b: c": want an identifier`, ""},
		{[]string{"analyze", racyModel, "--emit-form", "x#y"}, `want an identifier`, ""},
		{[]string{"analyze", racyModel, "--emit-form", "{a}"}, `want an identifier`, ""},
		{[]string{"analyze", racyModel, "--emit-form", ""}, `want an identifier`, ""},
		{[]string{"analyze", racyModel, "--emit-form", "byvariant"}, `already has a form of that name`, ""},
		{[]string{"compare", racyModel, "--store", "off", "--forms", "eager,eager"}, `form "eager" is named twice`, ""},
		{[]string{"compare", racyModel, "--store", "off", "--forms", "eager, byvariant ,byvariant"}, `form "byvariant" is named twice`, ""},
	} {
		// analyze's flags live in one command for the process: each case
		// sets the ones it does not test back to their defaults.
		args := tc.args
		if args[0] == "analyze" {
			for _, f := range []string{"--horizon", "--calibrate-rounds"} {
				if !slices.Contains(args, f) {
					args = append(args, f, map[string]string{"--horizon": strconv.Itoa(analyze.DefaultHorizon), "--calibrate-rounds": strconv.Itoa(calibrateRounds)}[f])
				}
			}
		}
		out, _, err := runCLI(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v (stdout %q), want a usage error (exit 2)", tc.args, err, out)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %q does not say %q", tc.args, err, tc.want)
		}
		if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
			t.Errorf("%q: %q names %s, which was not given", tc.args, err, tc.notWant)
		}
	}
}
