package config

import (
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// A generated form (AddForm) runs like a file's own: a hidden one is not
// listed; its text is part of its orchestration identity, so two proposals
// under one name never share a stored Definition; a bad one is an error
// naming the form.
func TestAddForm(t *testing.T) {
	m, err := Load("models/qwen3_14b_decode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddForm("probe", []byte("graphs:\n  layer_definition: {key: p}\n"), true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(m.Forms(), ","), "probe") || m.DefaultForm() != "graph" {
		t.Errorf("forms %v, default %s: a hidden form is listed", m.Forms(), m.DefaultForm())
	}
	if err := m.AddForm("auto", []byte("graphs:\n  layer_definition: {key: layer_definition}\n"), false); err != nil {
		t.Fatal(err)
	}
	a, err := m.Orchestration("auto")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := m.Orchestration("graph")
	if !strings.HasPrefix(a.Name, strings.Replace(g.Name, "/graph@", "/auto@", 1)+"+") {
		t.Errorf("identity %q: want graph's %q under auto, with the form's text hash", a.Name, g.Name)
	}
	if errs := m.FormChecks("auto"); len(errs) > 0 {
		t.Errorf("static checks: %v", errs)
	}
	for _, bad := range []string{"graphs:\n  nope: {}\n", "params: {zz: 1}\n", "graphs: [\n"} {
		err := m.AddForm("bad", []byte(bad), false)
		if err == nil || !strings.Contains(err.Error(), "(form bad)") {
			t.Errorf("AddForm(%q): %v; want an error naming the form", bad, err)
		}
	}
	if err := m.AddForm("graph", []byte("{}"), false); err == nil {
		t.Error("a second form graph: no error")
	}
}

// callLog records the block calls the interpreter reports.
type callLog struct {
	*stages.OrdinaryPath
	calls []string
	depth int
}

func (c *callLog) BlockCall(cs CallSite) {
	c.calls = append(c.calls, strings.Repeat(">", c.depth)+cs.Block)
	c.depth++
}
func (c *callLog) BlockEnd() { c.depth-- }

// CallObserver sees every block call at any depth, in order, on the
// ordinary path: DSv4's eager step makes 106 (the pair's four blocks
// inside it).
func TestCallObserver(t *testing.T) {
	m, err := Load("models/dsv4_flash_decode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &callLog{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots())}
	if err := m.Run(c, "eager"); err != nil {
		t.Fatal(err)
	}
	if len(c.calls) != 106 || c.calls[4] != "csa_hca_pair" || c.calls[5] != ">csa_attn" || c.depth != 0 {
		t.Errorf("%d calls, %v...", len(c.calls), c.calls[:8])
	}
}
