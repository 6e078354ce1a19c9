package config_test

import (
	"reflect"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

// TestManualDepViews: manual_dep on an entry tensor (upstream's
// make_tensor_external(..., manual_dep=true)) and on a view
// (ChipTensor::view(shapes, offsets, true)) opts that descriptor out of
// tracking: an argument through it waits on its root's creator only and
// records no write, and the trace's mdep says so per argument. A view
// derived from a manual_dep one is tracked again unless it says
// manual_dep itself, as upstream's view() and reshape() reset the flag.
func TestManualDepViews(t *testing.T) {
	src := upstreamHeader + `program:
  body:
    - alloc: ["a fp32[16]"]
    - {k: upd, args: ["inout a[0:+8]"]}
    - {k: upd, args: ["inout a[0:+8] manual_dep"]}
    - {k: use, args: ["in a", "in x"]}
    - let: {m: "a[8:+8] manual_dep"}
    - {k: upd, args: ["inout m"]}
    - {k: use, args: ["in m[0:+4]", "in x"]}
    - {k: upd, args: ["inout m[0:+4] as [2, 2]"]}
    - {k: use, args: ["in a[8:+8]", "in x"]}
    - {k: upd, args: ["inout y"]}
    - {k: use, args: ["in y", "in x"]}
    - {k: upd, args: ["inout y[0:+4]"]}
    - {k: use, args: ["in y[0:+4] manual_dep", "in y[0:+4]"]}
forms: {eager: {}}
`
	src = replaceOnce(src, "    - {name: x, dtype: fp32, shape: [16]}\n", "    - {name: x, dtype: fp32, shape: [16]}\n    - {name: y, dtype: fp32, shape: [16], manual_dep: true}\n")
	m, err := config.Parse("upstream.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var fanin [][]int
	var mdep [][]int
	for _, tk := range reftrace.Tasks(expand(t, m, "eager")) {
		fanin = append(fanin, tk.Fanin)
		var md []int
		for _, a := range tk.Args {
			md = append(md, a.MDep)
		}
		mdep = append(mdep, md)
	}
	wantFanin := [][]int{
		0:  {},     // alloc a
		1:  {0},    // a tracked write
		2:  {0},    // manual_dep: the creator only, not the writer 1
		3:  {0, 1}, // the reader sees 1, not 2 (its write was not recorded)
		4:  {0},    // through the let's manual_dep view
		5:  {0},    // m[0:+4] is tracked, and 4 recorded nothing
		6:  {0},    // a reshape of a view of m: tracked, no earlier writer
		7:  {0, 6}, // a[8:+8] sees 6's write
		8:  {},     // y, manual_dep: no creator, nothing recorded
		9:  {},     // nor for the reader
		10: {},     // y[0:+4] is tracked: no earlier writer (8 was manual)
		11: {10},   // the tracked argument sees 10; the manual_dep one nothing
	}
	if !reflect.DeepEqual(fanin, wantFanin) {
		t.Errorf("fanin\n%v, want\n%v", fanin, wantFanin)
	}
	wantMdep := [][]int{{0}, {0}, {1}, {0, 0}, {1}, {0, 0}, {0}, {0, 0}, {1}, {1, 0}, {0}, {1, 0}}
	if !reflect.DeepEqual(mdep, wantMdep) {
		t.Errorf("mdep\n%v, want\n%v", mdep, wantMdep)
	}
}

// TestManualDepErrors: a bad manual_dep is an error at its line.
func TestManualDepErrors(t *testing.T) {
	op := func(s string) string { return "program:\n  body:\n    - " + s + "\nforms: {eager: {}}\n" }
	for _, tc := range []struct {
		name, hdrOld, hdrNew, src, at string
		want                          []string
	}{
		{name: "entry manual_dep not a bool", hdrOld: "{name: x, dtype: fp32, shape: [16]}", hdrNew: "{name: x, dtype: fp32, shape: [16], manual_dep: yes}",
			src: op(`{k: upd, args: ["inout x"]}`), at: "manual_dep: yes", want: []string{`manual_dep "yes"`, "want true or false"}},
		{name: "a word after manual_dep", src: op(`{k: upd, args: ["inout x manual_dep twice"]}`), at: "manual_dep twice", want: []string{`unexpected "twice" after the view`}},
		{name: "manual_dep before the view's parts", src: op(`{k: upd, args: ["inout x manual_dep [0:+4]"]}`), at: "manual_dep [0", want: []string{`unexpected "[" after the view`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := upstreamHeader
			if tc.hdrOld != "" {
				hdr = replaceOnce(hdr, tc.hdrOld, tc.hdrNew)
			}
			src := hdr + tc.src
			m, err := config.Parse("upstream.yaml", []byte(src))
			if err == nil {
				_, err = config.Validate(m)
			}
			wantConfigError(t, err, "upstream.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}
