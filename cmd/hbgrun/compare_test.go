package main

import "testing"

// TestMsText: compare's values keep three significant digits below 0.1 ms
// (a sub-µs phase printed as 0.000 beside its ratio read as a ratio of
// zeros).
func TestMsText(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{
		{0, "0.000"},
		{210, "0.000210"},
		{19_100, "0.0191"},
		{195_000, "0.195"},
		{39_902_000, "39.902"},
	} {
		if got := msText(c.ns); got != c.want {
			t.Errorf("msText(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}
