package config_test

import (
	"slices"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// TestDependenciesAsDocumented runs the examples of doc.go's Dependencies
// section and checks each task's fanin, so that the section stays what the
// runtime does.
func TestDependenciesAsDocumented(t *testing.T) {
	src := langHeader + `blocks: {}
program:
  body:
    - alloc: ["a fp32[16]"]
    - {k: act, args: ["inout a"]}
    - {k: act, args: ["in a"]}
    - {k: act, args: ["out_existing a"]}
    - {k: act, args: ["in a[0:+8] as [8]"]}
    - {k: act, args: ["inout a"]}
    - {k: act, args: ["in a"]}
    - {k: act, args: ["no_dep a"]}
    - {k: act, args: ["in a"]}
    - scope: manual
      body:
        - {k: act, args: ["inout a"]}
        - scope: auto
          body:
            - {k: act, args: ["in a"]}
    - {k: act, args: ["in a"]}
    - alloc: ["m fp32[16] manual_dep"]
    - {k: act, args: ["inout m"]}
    - {k: act, args: ["in m"]}
    - {k: act, args: ["out o fp32[16]"]}
    - {k: act, args: ["no_dep o"]}
    - {k: act, args: ["in x"]}
forms:
  eager: {}
`
	m, err := config.Parse("deps.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	o := stages.NewOrdinaryPath(m.EntryRoots())
	if err := m.Run(o, "eager"); err != nil {
		t.Fatal(err)
	}
	want := [][]stages.TaskID{
		0:  nil,       // alloc a: the creator
		1:  {0},       // inout: the creator (no writer yet)
		2:  {0, 1},    // in: creator and the writer
		3:  {0},       // out_existing: the creator only, not the reader 2 nor the writer 1
		4:  {0, 1, 3}, // in over part: both writers (out_existing retired none)
		5:  {0, 1, 3}, // inout: creator and writers, not the reader 4; retires 1 and 3
		6:  {0, 5},    // in: only 5 is left
		7:  {0},       // no_dep: the creator only
		8:  {0, 5},    // in: no_dep recorded no write
		9:  nil,       // manual scope: deps only, not even the creator
		10: nil,       // an auto scope inside a manual one is manual
		11: {0, 5},    // after the scope: 9's write was not recorded
		12: nil,       // alloc m manual_dep
		13: {12},      // manual_dep: the creator only
		14: {12},      // and the write 13 was not recorded
		15: nil,       // out: a new root, no wait
		16: {15},      // its creator is 15
		17: nil,       // an entry tensor has no creator
	}
	if n := o.NumTasks(); n != len(want) {
		t.Fatalf("%d tasks, want %d", n, len(want))
	}
	for id, w := range want {
		got := slices.Clone(o.Fanin(stages.TaskID(id)))
		slices.Sort(got)
		if !slices.Equal(got, w) {
			t.Errorf("task %d waits on %v, want %v", id, got, w)
		}
	}
}
