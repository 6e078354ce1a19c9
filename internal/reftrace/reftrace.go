// Package reftrace is the reference task-trace format (one JSON object per
// line, as in the shared reference's README): its line types, which
// `hbgrun expand` writes and the tests read back, and a reader. It knows
// nothing of hbg's own types, so every package's tests can use it.
package reftrace

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Arg is one tensor argument of a task, or one boundary slot.
type Arg struct {
	Tag   string  `json:"tag"`
	Root  string  `json:"root"`
	RKind string  `json:"rkind"`
	RID   int     `json:"rid"`
	Off   int64   `json:"off"`
	Shape []int64 `json:"shape"`
	// Strides are written only for a strided view (a tile of a wider
	// tensor); a contiguous view's are its shape's row-major strides.
	Strides []int64 `json:"strides,omitempty"`
	DType   string  `json:"dtype"`
	Bytes   int64   `json:"bytes"`
	BSlot   int     `json:"bslot"`
	MDep    int     `json:"mdep"`
}

// Pred is a task's predicate: the task runs only if element Idx of Root
// compares true (Op 0 is greater-than) against Target.
type Pred struct {
	Root   string  `json:"root"`
	Idx    []int64 `json:"idx"`
	Op     int     `json:"op"`
	Target int64   `json:"target"`
}

// GraphRef marks a task recorded inside a Graph body.
type GraphRef struct {
	Def   string `json:"def"`
	Key   string `json:"key"`
	Inst  int    `json:"inst"`
	First int    `json:"first"`
}

// Line is any line of a trace, every event's fields in one struct; Ev says
// which event it is (task, scope_begin, scope_end, graph_begin, graph_end,
// get_tensor_data, summary).
type Line struct {
	Ev       string    `json:"ev"`
	ID       int       `json:"id"`
	Kind     string    `json:"kind"`
	K        []int     `json:"k"`
	Name     string    `json:"name"`
	Args     []Arg     `json:"args"`
	Scalars  []uint64  `json:"scalars"`
	BlockNum int       `json:"block_num"`
	Early    int       `json:"early"`
	Sync     int       `json:"sync_start"`
	Deps     []int     `json:"deps"`
	Fanin    []int     `json:"fanin"`
	Depth    int       `json:"depth"`
	Manual   int       `json:"manual"`
	Pred     *Pred     `json:"pred"`
	Graph    *GraphRef `json:"graph"`
	Mode     int       `json:"mode"`
	Def      string    `json:"def"`
	Key      string    `json:"key"`
	Inst     int       `json:"inst"`
	Boundary []Arg     `json:"boundary"`
	NTasks   int       `json:"ntasks"`
	Root     string    `json:"root"`
	Idx      []int64   `json:"idx"`
	Value    int64     `json:"value"`
	Tasks    int       `json:"tasks"`
	Edges    int       `json:"edges"`
}

// Read reads every line of a trace.
func Read(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// Load reads a trace file, gunzipping a name that ends in .gz.
func Load(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	lines, err := Read(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lines, nil
}

// Events keeps the lines of one event kind (task, graph_begin, …).
func Events(lines []Line, ev string) []Line {
	var out []Line
	for _, l := range lines {
		if l.Ev == ev {
			out = append(out, l)
		}
	}
	return out
}

// Tasks keeps the task lines.
func Tasks(lines []Line) []Line { return Events(lines, "task") }
