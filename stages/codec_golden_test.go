package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden images and their descriptions in testdata/image (commit only diffs you understand)")

// tinyImages runs a tiny orchestration the way the runtime ships it: an
// ordinary task, two calls of one Graph key (recorded once, replayed as two
// GRAPH tasks patched with their own rows and scalar), and an ordinary task
// reading what they wrote. It returns the Definition's image and the run
// image, whose Graph submissions name that Definition's content hash.
func tinyImages(t *testing.T) (def, run []byte) {
	entry := []Root{
		{Name: "x", Kind: RootEntry, DType: FP32, Shape: []int64{4, 16}, Elems: 64},
		{Name: "y", Kind: RootEntryOutput, DType: FP32, Shape: []int64{4, 16}, Elems: 64},
	}
	o := NewOrdinaryPath(entry)
	o.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 0, -1}, BlockNum: 4, Args: []Arg{{Tag: TagInOut, View: NewView(0, 0, FP32, 4, 16)}}})
	body := func(s Submitter, b *Boundary) error {
		_, scratch := s.Alloc([]RootSpec{{Name: "scratch", DType: FP32, Shape: []int64{16}}})
		sv := NewView(scratch, 0, FP32, 16)
		s.Submit(&Task{Kind: KindAIV, Kernel: [3]KernelID{-1, 1, -1}, BlockNum: 1,
			Args: []Arg{{Tag: TagInput, View: b.Tensors[0].View}, {Tag: TagOutputExisting, View: sv}}, Scalars: []Scalar{b.Scalars[0]}})
		s.Submit(&Task{Kind: KindAIC, Kernel: [3]KernelID{2, -1, -1}, BlockNum: 2, Launch: LaunchEarly,
			Args: []Arg{{Tag: TagInput, View: sv}, {Tag: TagInOut, View: b.Tensors[1].View}}, Scalars: []Scalar{Static(7)}})
		return nil
	}
	var rec Recorder
	var d *Definition
	for row := int64(0); row < 2; row++ {
		call := &GraphCall{Key: "row",
			Boundary: []Arg{{Tag: TagInput, View: NewView(0, 16*row, FP32, 16)}, {Tag: TagInOut, View: NewView(1, 16*row, FP32, 16)}},
			Scalars:  []uint64{uint64(row)}, Body: body}
		fk := FullKey("tiny", call.Key, call.Config)
		if d == nil {
			var err error
			if d, err = rec.Record(call.Key, fk, call.Boundary, o.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body); err != nil {
				t.Fatal(err)
			}
			def = EncodeDefinition(d) // sets the content hash the submissions name
		}
		o.SubmitGraph(call, GraphSubmission{FullKey: fk, DefHash: d.ContentHash}, d.HeapBytes, d.WrittenSlots())
	}
	o.Submit(&Task{Kind: KindMIX, Kernel: [3]KernelID{3, 4, 4}, BlockNum: 8, Launch: LaunchSyncStart, Args: []Arg{{Tag: TagInput, View: NewView(1, 0, FP32, 4, 16)}}})
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	return def, EncodeRunImage(o.Image())
}

// TestImageGolden pins the bytes of two Definitions and two run images in
// testdata/image (one pair from a tiny orchestration, one hand-built pair
// with every section in use) and their descriptions: the encoder writes the
// stored bytes, each stored image decodes and re-encodes to the same bytes,
// and DescribeImage prints the stored .txt. A format change must bump the
// image's version; regenerate with -update.
func TestImageGolden(t *testing.T) {
	tinyDef, tinyRun := tinyImages(t)
	cases := []struct {
		name string
		b    []byte
	}{
		{"tiny.def", tinyDef},
		{"tiny.run", tinyRun},
		{"every-section.def", EncodeDefinition(codecDef())},
		{"every-section.run", EncodeRunImage(codecRun())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", "image", c.name)
			var desc bytes.Buffer
			if err := DescribeImage(&desc, c.b); err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(path, c.b, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path+".txt", desc.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.b, golden) {
				t.Fatalf("the encoder no longer writes %s (%d bytes, stored %d): a format change must bump the image version; then run -update", path, len(c.b), len(golden))
			}
			var again []byte
			if strings.HasSuffix(c.name, ".def") {
				d, err := DecodeDefinition(golden)
				if err != nil {
					t.Fatal(err)
				}
				again = EncodeDefinition(d)
			} else {
				img, err := DecodeRunImage(golden)
				if err != nil {
					t.Fatal(err)
				}
				again = EncodeRunImage(img)
			}
			if !bytes.Equal(again, golden) {
				t.Fatalf("%s decoded and re-encoded differs from its bytes", path)
			}
			var got bytes.Buffer
			if err := DescribeImage(&got, golden); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(path + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Fatalf("DescribeImage(%s) differs from %s.txt (run -update and read the diff):\n%s", path, path, got.String())
			}
		})
	}
	// The run image replays the Definition stored beside it.
	d, err := DecodeDefinition(tinyDef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := DecodeRunImage(tinyRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Graphs) != 2 || img.Graphs[0].DefHash != d.ContentHash || img.Graphs[1].DefHash != d.ContentHash {
		t.Fatalf("tiny run image's Graph submissions %+v do not both replay the tiny Definition %#x", img.Graphs, d.ContentHash)
	}
}

// TestDescribeRefusals: bytes that are no image, or a bad one, are an error
// wrapping ErrBadImage and never a panic; what can be read of the header is
// written first, and an image whose only fault is its hash is described in
// full.
func TestDescribeRefusals(t *testing.T) {
	def := EncodeDefinition(codecDef())
	run := EncodeRunImage(codecRun())
	mut := func(b []byte, f func(b []byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	cases := []struct {
		name    string
		b       []byte
		want    string // in the error
		printed string // in the output ("" for none)
	}{
		{"empty", nil, "0 bytes are too short", ""},
		{"text", []byte("hello, world\n"), `magic "hell" is neither`, ""},
		{"definition header cut", def[:20], "shorter than its 136-byte header", `magic "HBGD", version 3, header 136 bytes`},
		{"definition cut", def[:len(def)-3], "says 608 bytes, got 605", "definition image, 605 bytes"},
		{"definition version", mut(def, func(b []byte) { b[4] = 1 }), "version 1, this device reads version 3", `magic "HBGD", version 1, header 136 bytes`},
		{"definition bit flip", mut(def, func(b []byte) { b[len(b)-1] ^= 1 }), "does not verify", `key "moe_blocj"`},
		{"definition forward fanin", mut(def, func(b []byte) {
			binary.LittleEndian.PutUint32(b[binary.LittleEndian.Uint32(b[defSecAt+4*dsFaninIdx:]):], 3)
			binary.LittleEndian.PutUint64(b[hashOff:], imageHash(b, hashOff))
		}), "must precede", "(verifies)"},
		{"run cut", run[:50], "shorter than its 80-byte header", `magic "HBGR", version 4, header 80 bytes`},
		{"run version", mut(run, func(b []byte) { b[4] = 1 }), "version 1", "run image, 270 bytes"},
		{"run bit flip", mut(run, func(b []byte) { b[len(b)-1] ^= 1 }), "does not verify", "graph submissions: 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := DescribeImage(&out, c.b)
			if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrBadImage containing %q", err, c.want)
			}
			if c.printed == "" && out.Len() > 0 || !strings.Contains(out.String(), c.printed) {
				t.Fatalf("output %q, want it to contain %q", out.String(), c.printed)
			}
		})
	}
}
