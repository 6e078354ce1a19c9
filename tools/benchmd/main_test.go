package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/hbg-dev/hbg/stages
cpu: Some CPU
BenchmarkSubmitEager-2   	     100	   3900000 ns/op	       244.0 ns/task	      64 B/op	       1 allocs/op
BenchmarkSubmitEager-2   	     100	   3700000 ns/op	       232.0 ns/task	      64 B/op	       1 allocs/op
BenchmarkSubmitEager-2   	     100	   4100000 ns/op	       260.0 ns/task	      64 B/op	       1 allocs/op
PASS
ok  	github.com/hbg-dev/hbg/stages	3.2s
pkg: github.com/hbg-dev/hbg/tests
BenchmarkPassWarm/full-2 	      50	    180000 ns/op	       170.0 control-µs
`

const scaleSample = `**BenchmarkScaleKeysHost** (per key; medians of 3 runs; growth per doubling of keys from the size before)

| keys | ns/key | cpu-ns/key | B/key | growth (wall) | growth (CPU) |
|---:|---:|---:|---:|---:|---:|
| 100 | 244 | 847 | 32.4 | — | — |
| 100→100000 | | | | 1.01× | 0.89× |
`

// TestRender: medians of the run's samples, each target met or missed by
// them, the scaling summary from its table; nothing the run did not say.
func TestRender(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	page := render(r, parseScale(scaleSample), "bench.txt", "bench-scale.md")
	for _, want := range []string{
		"| ordinary submit, DSv4 eager sequence (`stages` `BenchmarkSubmitEager`) | ≤ 250 ns/task | 244 ns/task | met |",
		"| DSv4 full, warm control plane (device skipped) (`tests` `BenchmarkPassWarm/full`) | ≤ 150 control-µs | 170 control-µs | **missed** |",
		"| stages | SubmitEager | 3900000 ns/op, 244 ns/task, 64 B/op, 1 allocs/op | 3700000–4100000 ns/op | 3 |",
		"| ScaleKeysHost | key | 100→100000 | 1.01× | 0.89× |",
		"on Some CPU (linux/amd64",
		"`BenchmarkSimulateDSv4Eager`) | ≤ 30000000 ns/op | not run |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

func TestParseRefusesNoBenchmarks(t *testing.T) {
	if _, err := parse(strings.NewReader("PASS\nok x 1s\n")); err == nil {
		t.Fatal("output with no benchmark lines was taken")
	}
}

// TestServingSection: the serving runs' table goes on the page as it is,
// under its heading; none, no section.
func TestServingSection(t *testing.T) {
	md := "| model | form |\n|---|---|\n| qwen3_14b_decode_serving | graph |\n"
	got := servingSection(md, "docs/bench/bench-serving.md")
	for _, want := range []string{"## Serving runs", "[docs/bench/bench-serving.md](docs/bench/bench-serving.md)", md} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if servingSection(" \n", "x.md") != "" {
		t.Error("an empty table made a section")
	}
}
