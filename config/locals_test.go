package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

// TestHostLocals: a local op is a host-side int of upstream's program,
// computed once and used below; a local assigned inside a loop keeps its
// value after it, so a reduction across the loop (max_bn = max over b of
// ceil(context_lens[b] / BS)) reads as the C++ does. context_lens is
// [7, 16, 100] and BS 16: ceil gives 1, 1, 7, so max_bn is 7.
func TestHostLocals(t *testing.T) {
	src := dataHeader + `program:
  body:
    - local: {max_bn: 0, nb: 3}
    - loop: {var: b, to: nb}
      body:
        - read: {cl: "context_lens[b]"}
        - local: {bn: "(cl + BS - 1) / BS"}
        - local: {max_bn: "max(max_bn, bn)"}
    - local: {half: "max_bn / 2 + 1"}
    - loop: {var: i, to: max_bn}
      body:
        - {k: up, args: ["inout out[0]"], scalars: [max_bn, half, i]}
forms: {eager: {}}
`
	m, err := config.Parse("data.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tasks := reftrace.Tasks(expand(t, m, "eager"))
	if len(tasks) != 7 {
		t.Fatalf("%d tasks, want max_bn = 7", len(tasks))
	}
	if got, want := tasks[6].Scalars, []uint64{7, 4, 6}; !reflect.DeepEqual(got, want) {
		t.Errorf("last task's scalars %v, want %v", got, want)
	}
	sum, err := config.Validate(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := sum.Forms[0].Tasks; n != 7 {
		t.Errorf("validate counts %d tasks, want 7", n)
	}
}

// TestHostLocalsInGraphs: a local in a Graph body computed from a param
// makes what it shapes depend on that param, so a key without the param
// is a StructureError naming the line that uses the local.
func TestHostLocalsInGraphs(t *testing.T) {
	src := dataHeader + `blocks:
  tile:
    params: [n]
    boundary:
      - {name: out, tag: inout}
    body:
      - local: {rows: "n * 2"}
      - loop: {var: r, to: rows}
        body:
          - {k: up, args: ["inout out[0]"]}
program:
  body:
    - loop: {var: n, from: 1, to: 3}
      body:
        - call: tile
          with: {n: n}
forms:
  eager: {}
  keyed: {graphs: {tile: {key: "tile{n}"}}}
  unkeyed: {graphs: {tile: {key: tile}}}
`
	m, err := config.Parse("data.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reftrace.Tasks(expand(t, m, "keyed"))); n != 6 {
		t.Errorf("keyed: %d tasks, want 2 + 4", n)
	}
	var se *config.StructureError
	checks := m.GraphChecks()
	found := false
	for _, err := range checks {
		if errors.As(err, &se) && se.Param == "n" && se.Line == lineOf(src, "loop: {var: r, to: rows}") {
			found = true
		}
	}
	if !found {
		t.Errorf("no StructureError on n at the loop over rows: %v", checks)
	}
}

// TestHostLocalErrors: a bad local is an error at its line.
func TestHostLocalErrors(t *testing.T) {
	op := func(s string) string { return "program:\n  body:\n" + s + "forms: {eager: {}}\n" }
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{"a constant's name", op("    - local: {BS: 3}\n"), "BS: 3", []string{"a constant has this name"}},
		{"a loop var's name", op("    - loop: {var: i, to: 2}\n      body:\n        - local: {i: 3}\n"), "i: 3", []string{"already a param, scalar or loop var"}},
		{"bad expression", op("    - local: {a: \"1 +\"}\n"), "1 +", []string{`local.a "1 +"`, "bad expression"}},
		{"a list", op("    - local: {a: [1]}\n"), "a: [1]", []string{"want an integer expression"}},
		{"out of scope after its list", op("    - loop: {var: i, to: 2}\n      body:\n        - local: {a: i}\n    - {k: up, args: [\"inout out[0]\"], scalars: [a]}\n"), "scalars: [a]", []string{`undefined name "a"`}},
		{"overflow", op("    - local: {a: \"9223372036854775807\"}\n    - local: {b: \"a + 1\"}\n"), "a + 1", []string{"overflow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := dataHeader + tc.src
			m, err := config.Parse("data.yaml", []byte(src))
			if err == nil {
				_, err = config.Validate(m)
			}
			if err != nil && !strings.Contains(err.Error(), "data.yaml") {
				t.Fatalf("error without its file: %v", err)
			}
			wantConfigError(t, err, "data.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}

// TestValidTasks: "TASK?" is upstream's if (t.is_valid()) add_dep(t): an
// op id no op submitted in this block call, or a task list's unset
// elements, are left out instead of refused; and if (deps_count > 0) is a
// local counting what the host stored, as the C++ counts it.
func TestValidTasks(t *testing.T) {
	src := upstreamHeader + `program:
  body:
    - tasks: {late: 1, buf: 4}
    - local: {deps_count: 0}
    - loop: {var: i, to: 4}
      body:
        - {id: "buf[i]", k: upd, args: ["inout x[i:+1]"], if: "i % 2 == 0"}
        - local: {deps_count: "deps_count + (i % 2 == 0)"}
    - {id: never, k: upd, args: ["inout x"], if: 0}
    - {dummy: true, deps: ["buf?"], id: "late[0]", if: "deps_count > 0"}
    - {k: use, args: ["in x", "in x"], deps: ["late[0]?", "buf[1:+3]?", "never?"]}
forms: {eager: {}}
`
	m, err := config.Parse("upstream.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var deps [][]int
	for _, tk := range reftrace.Tasks(expand(t, m, "eager")) {
		deps = append(deps, tk.Deps)
	}
	if want := [][]int{{}, {}, {0, 1}, {2, 1}}; !reflect.DeepEqual(deps, want) {
		t.Errorf("deps %v, want %v", deps, want)
	}
	for _, tc := range []struct{ old, new, at, want string }{
		{`deps: ["buf?"]`, `deps: ["buf"]`, `deps: ["buf"]`, "element 1 of task list buf is not set"},
		{`"never?"]`, `"never"]`, `"never"]`, `explicit dependency on "never"`},
	} {
		s := replaceOnce(src, tc.old, tc.new)
		m, err := config.Parse("upstream.yaml", []byte(s))
		if err == nil {
			_, err = config.Validate(m)
		}
		wantConfigError(t, err, "upstream.yaml", lineOf(s, tc.at), []string{tc.want})
	}
}
