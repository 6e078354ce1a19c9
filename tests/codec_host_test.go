package tests

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// TestDecodeDefinitionHostModels: on every Definition of every form of the
// shipped models, the host's decode (what a load from the store on disk
// keeps) agrees with the full decode on every field it fills, leaves the
// pools and the boundary signature out, and finds the same written slots.
func TestDecodeDefinitionHostModels(t *testing.T) {
	for _, file := range []string{dsv4, "../config/models/qwen3_14b_decode.yaml"} {
		m, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, form := range m.Forms() {
			// Every Definition that records: a body that cannot (an
			// unsupported construct) has no image to decode.
			o := &collector{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}}
			if err := m.Run(o, form); err != nil {
				t.Fatal(err)
			}
			if o.err != nil {
				t.Logf("%s %s: %v", file, form, o.err)
			}
			for _, img := range o.images {
				n++
				full, err := stages.DecodeDefinition(img)
				if err != nil {
					t.Fatalf("%s %s: %v", file, form, err)
				}
				host, written, err := stages.DecodeDefinitionHost(img)
				if err != nil {
					t.Fatalf("%s %s %q: the host decode refuses what the full decode accepts: %v", file, form, full.Key, err)
				}
				want := *full
				want.Tensors, want.Scalars, want.Fanin, want.Roots, want.Preds, want.Boundary = nil, nil, nil, nil, nil, nil
				if !reflect.DeepEqual(&want, host) {
					t.Errorf("%s %s %q: the host decode differs from the full decode", file, form, full.Key)
				}
				if w := full.WrittenSlots(); !slices.Equal(written, w) {
					t.Errorf("%s %s %q: written slots %v, want %v", file, form, full.Key, written, w)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no Definition", file)
		}
		t.Logf("%s: %d Definitions agree", file, n)
	}
}

// TestPublishModels: on every Definition of every form of the shipped
// models, what a recorder publishes (stages.Recorder.Publish: the image
// written from its own buffers, and the host's part) is Build's Definition
// encoded, and the host's part is what a load from the store on disk
// decodes from that image.
func TestPublishModels(t *testing.T) {
	for _, file := range []string{dsv4, "../config/models/qwen3_14b_decode.yaml"} {
		m, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range m.Forms() {
			o := &publishChecker{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots()), seen: map[uint64]bool{}, t: t, where: file + " " + form}
			if err := m.Run(o, form); err != nil {
				t.Fatal(err)
			}
			if o.n == 0 && strings.Contains(form, "full") {
				t.Errorf("%s: no Definition published", o.where)
			}
		}
	}
}

type publishChecker struct {
	*stages.OrdinaryPath
	rec   stages.Recorder
	seen  map[uint64]bool
	t     *testing.T
	where string
	n     int
}

func (c *publishChecker) Graph(call *stages.GraphCall) stages.TaskID {
	fk := stages.FullKey("publish", call.Key, call.Config)
	if !c.seen[fk] {
		c.seen[fk] = true
		err := c.rec.RecordBody(call.Key, fk, call.Boundary, c.BoundaryRoots(call.Boundary), call.Scalars, call.ExtDeps, call.Body)
		if err == nil {
			c.n++
			d, err := c.rec.Build()
			if err != nil {
				c.t.Fatalf("%s %s: Build: %v", c.where, call.Key, err)
			}
			p := c.rec.Publish()
			// Publish ships the transitive reduction of Build's fanin.
			stages.ReduceDefinition(d)
			img := stages.EncodeDefinition(d)
			host, written, err := stages.DecodeDefinitionHost(img)
			switch {
			case err != nil:
				c.t.Fatalf("%s %s: %v", c.where, call.Key, err)
			case !bytes.Equal(p.Image, img) || p.Hash != d.ContentHash:
				c.t.Errorf("%s %s: the published image is not Build's encoded", c.where, call.Key)
			case !reflect.DeepEqual(p.Def, host) || !slices.Equal(p.Written, written):
				c.t.Errorf("%s %s: the published host part differs from the host decode's", c.where, call.Key)
			}
		}
	}
	return c.OrdinaryPath.Graph(call)
}
