package config_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/stages"
)

// keyCalls runs the ordinary path and keeps what each Graph call hands
// the runtime to find its Definition.
type keyCalls struct {
	*stages.OrdinaryPath
	calls []keyCall
}

type keyCall struct {
	key      string
	config   []uint64
	complete bool
}

func (o *keyCalls) Graph(c *stages.GraphCall) stages.TaskID {
	o.calls = append(o.calls, keyCall{key: c.Key, config: slices.Clone(c.Config), complete: c.KeyComplete})
	return o.OrdinaryPath.Graph(c)
}

func runKeyCalls(t *testing.T, m *config.Model, form string) []keyCall {
	t.Helper()
	o := &keyCalls{OrdinaryPath: stages.NewOrdinaryPath(m.EntryRoots())}
	if err := m.Run(o, form); err != nil {
		t.Fatal(err)
	}
	return o.calls
}

// TestSharedKeys: two blocks whose Graph keys in one form can be the same
// text are a *config.SharedKeyError at the later entry, naming both blocks
// and the text, and neither block's calls are KeyComplete (the outside
// tester's F1: blk_b's calls replayed blk_a's Definition). Templates that
// cannot meet pass, whatever they look like.
func TestSharedKeys(t *testing.T) {
	const path = "testdata/keys/shared_key.yaml"
	base := readFile(t, path)
	const graphs = "      blk_a: {key: shared}\n      blk_b: {key: shared}\n"
	if !strings.Contains(base, graphs) {
		t.Fatal("test does not apply")
	}
	// blk_b with variants, for keys that interpolate one.
	variants := strings.Replace(base, "  blk_b:\n    params: [layer]\n", "  blk_b:\n    params: [layer]\n    variants: [p, q]\n", 1)
	variants = strings.Replace(variants, "with: {layer: 1, x: x2}", "with: {layer: 1, x: x2, variant: q}", 1)
	prefixVariants := strings.Replace(variants, "variants: [p, q]", "variants: [ab, abc, b]", 1)
	prefixVariants = strings.Replace(prefixVariants, "variant: q}", "variant: abc}", 1)
	for _, tc := range []struct {
		name      string
		src       string
		a, b      string // the graphs entries of blk_a and blk_b
		text      string // a key both make; "" when none
		wantInMsg string
	}{
		{name: "one key for two blocks", a: "{key: shared}", b: "{key: shared}", text: "shared",
			wantInMsg: `Graph key "shared" of blk_b is also the key of blk_a (` + path + `:41): calls of both would share one Definition`},
		{name: "a block's default key is another's name", a: "{}", b: "{key: blk_a}", text: "blk_a"},
		{name: "templates that meet", a: `{key: "L{layer}"}`, b: `{key: "L1{layer}"}`, text: "L10",
			wantInMsg: `Graph key "L1{layer}" of blk_b can be "L10", as can key "L{layer}" of blk_a (` + path + `:41)`},
		{name: "a sign meets a literal minus", a: `{key: "L{layer}"}`, b: `{key: "L-{layer}"}`, text: "L-1"},
		{name: "the same template, another param in config", a: `{key: "L{layer}"}`, b: `{key: "L{layer}", config: [layer]}`, text: "L0"},
		{name: "a variant name meets a literal", src: variants, a: "{key: m_q}", b: `{key: "m_{variant}"}`, text: "m_q"},
		{name: "separated by a letter", a: `{key: "L{layer}a"}`, b: `{key: "L{layer}b"}`},
		{name: "a leading zero", a: `{key: "x{layer}"}`, b: `{key: "x0{layer}"}`},
		{name: "a digit against a letter", a: `{key: "x{layer}"}`, b: `{key: "xa"}`},
		{name: "variant names apart", src: variants, a: "{key: m_z}", b: `{key: "m_{variant}"}`},
		// Variant names are a trie in the key's automaton: one that is a
		// prefix of another ends inside it.
		{name: "a variant name inside another", src: prefixVariants, a: "{key: m_ab}", b: `{key: "m_{variant}"}`, text: "m_ab"},
		{name: "the longer variant name", src: prefixVariants, a: "{key: m_abc}", b: `{key: "m_{variant}"}`, text: "m_abc"},
		{name: "a variant name's prefix only", src: prefixVariants, a: "{key: m_a}", b: `{key: "m_{variant}"}`},
		{name: "past the longest variant name", src: prefixVariants, a: "{key: m_abcd}", b: `{key: "m_{variant}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if src == "" {
				src = base
			}
			src = strings.Replace(src, graphs, fmt.Sprintf("      blk_a: %s\n      blk_b: %s\n", tc.a, tc.b), 1)
			m, err := config.Parse(path, []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			errs := m.FormChecks("full")
			calls := runKeyCalls(t, m, "full")
			if len(calls) != 2 {
				t.Fatalf("%d Graph calls, want 2", len(calls))
			}
			if tc.text == "" {
				if len(errs) != 0 {
					t.Fatalf("%v, want no error", errs)
				}
				if !calls[0].complete || !calls[1].complete || calls[0].key == calls[1].key {
					t.Errorf("calls %+v: want KeyComplete, keys apart", calls)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(errs), errs)
			}
			var se *config.SharedKeyError
			if !errors.As(errs[0], &se) {
				t.Fatalf("%T (%v), want *config.SharedKeyError", errs[0], errs[0])
			}
			lineA, lineB := lineOf(src, "      blk_a: "), lineOf(src, "      blk_b: ")
			if se.Form != "full" || se.Block != "blk_b" || se.Other != "blk_a" || se.Text != tc.text || se.Line != lineB || se.OtherLine != lineA {
				t.Errorf("%+v, want blk_b at line %d against blk_a at %d, text %q", se, lineB, lineA, tc.text)
			}
			msg := se.Error()
			for _, w := range []string{fmt.Sprintf("%s:%d: form full: ", path, lineB), "(give each block its own key)", tc.wantInMsg} {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not contain %q", msg, w)
				}
			}
			for _, c := range calls {
				if c.complete {
					t.Errorf("call %s is KeyComplete under a shared key", c.key)
				}
			}
			if _, err := config.Validate(m); !errors.As(err, &se) {
				t.Errorf("Validate: %v, want the SharedKeyError", err)
			}
			// Other forms are other orchestrations, other full_keys: the
			// eager form has no Graph and no error.
			if errs := m.FormChecks("eager"); len(errs) != 0 {
				t.Errorf("eager: %v", errs)
			}
		})
	}
}

// TestSharedKeyAcrossForms: one key in two forms is two full_keys (the form
// is part of the orchestration's identity), not an error.
func TestSharedKeyAcrossForms(t *testing.T) {
	const path = "testdata/keys/shared_key.yaml"
	src := strings.Replace(readFile(t, path), "  full:\n    graphs:\n      blk_a: {key: shared}\n      blk_b: {key: shared}\n",
		"  a:\n    graphs:\n      blk_a: {key: shared}\n  b:\n    graphs:\n      blk_b: {key: shared}\n", 1)
	m, err := config.Parse(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if errs := m.GraphChecks(); len(m.Forms()) != 3 || len(errs) != 0 {
		t.Fatalf("forms %v, errors %v; want 3 forms, no error", m.Forms(), errs)
	}
}

// TestInterpolatedKeyValues: a key's text need not tell the values it
// interpolates apart ("L{a}{b}" is L111 for a=1, b=11 and for a=11, b=1,
// whose bodies run different kernels: the outside tester's F3), so each
// interpolated param's value is hashed into full_key too, after config's;
// a param config already hashes is not hashed twice, so DSv4's full_keys
// stay what they were.
func TestInterpolatedKeyValues(t *testing.T) {
	m := mustLoad(t, "testdata/keys/interpolated_key.yaml")
	if errs := m.GraphChecks(); len(errs) != 0 {
		t.Fatal(errs)
	}
	calls := runKeyCalls(t, m, "full")
	want := []keyCall{{key: "L111", config: []uint64{1, 11}, complete: true}, {key: "L111", config: []uint64{11, 1}, complete: true}}
	if len(calls) != 2 || !slices.EqualFunc(calls, want, func(a, b keyCall) bool {
		return a.key == b.key && slices.Equal(a.config, b.config) && a.complete == b.complete
	}) {
		t.Fatalf("calls %+v, want %+v", calls, want)
	}
	if stages.FullKey("x", calls[0].key, calls[0].config) == stages.FullKey("x", calls[1].key, calls[1].config) {
		t.Fatal("one full_key for both calls")
	}

	// Config first, then the key's others: {b} in config and {a} only in
	// the key hash b, then a.
	src := strings.Replace(readFile(t, "testdata/keys/interpolated_key.yaml"), `blk: {key: "L{a}{b}"}`, `blk: {key: "L{a}{b}", config: [b]}`, 1)
	m2, err := config.Parse("interpolated_key.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if calls := runKeyCalls(t, m2, "full"); len(calls) != 2 || !slices.Equal(calls[0].config, []uint64{11, 1}) {
		t.Fatalf("calls %+v, want config [11 1] first", calls)
	}

	dsv4 := loadModel(t)
	got := map[string][]uint64{}
	for _, c := range runKeyCalls(t, dsv4, "full") {
		got[c.key] = c.config
	}
	for key, cfg := range map[string][]uint64{"csa_moe_block:1": {1}, "csa_moe_block:0": {0}, "hash_moe_l1_block": {1}, "hca_attn_block": nil} {
		if g, ok := got[key]; !ok || !slices.Equal(g, cfg) {
			t.Errorf("DSv4 full %s: config %v, want %v", key, g, cfg)
		}
	}
}

// TestKeyAutomatonBound: a key whose automaton would be too large to
// compare with other keys (sharedKeys' product search grows with both) is
// refused at its line; a {variant} counts its block's names. The outside
// tester's F1 class: unbounded, a few kilobytes of key took minutes.
func TestKeyAutomatonBound(t *testing.T) {
	const path = "testdata/keys/shared_key.yaml"
	base := readFile(t, path)
	for _, tc := range []struct {
		name     string
		variants int
		key      string
		wantErr  bool
	}{
		{name: "100 variant names", variants: 100, key: "m_{variant}"},
		{name: "1000 variant names", variants: 1000, key: "m_{variant}", wantErr: true},
		{name: "200 names, four times", variants: 200, key: "{variant}{variant}{variant}{variant}", wantErr: true},
		{name: "1000 names, not in the key", variants: 1000, key: "m_{layer}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := make([]string, tc.variants)
			for i := range names {
				names[i] = fmt.Sprintf("v%d", i)
			}
			src := strings.Replace(base, "  blk_b:\n    params: [layer]\n", "  blk_b:\n    params: [layer]\n    variants: ["+strings.Join(names, ", ")+"]\n", 1)
			src = strings.Replace(src, "with: {layer: 1, x: x2}", "with: {layer: 1, x: x2, variant: v1}", 1)
			src = strings.Replace(src, "      blk_b: {key: shared}\n", fmt.Sprintf("      blk_b: {key: %q, config: [variant]}\n", tc.key), 1)
			_, err := config.Parse(path, []byte(src))
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantConfigError(t, err, path, lineOf(src, "      blk_b: {key:"), []string{"key of blk_b", "too large to compare", "at most 512", fmt.Sprintf("%d variant names", tc.variants)})
		})
	}
}
