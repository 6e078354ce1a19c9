package config_test

import (
	"reflect"
	"testing"

	"github.com/hbg-dev/hbg/config"
	"github.com/hbg-dev/hbg/internal/reftrace"
)

// mixHeader has an AIC kernel and two AIV ones, for MixedKernels of three
// different kernels.
const mixHeader = `model: mix
entry:
  tensors:
    - {name: x, dtype: fp32, shape: [16]}
kernels:
  - {name: qk, core: aic, sig: x}
  - {name: sm, core: aiv, sig: x, early: true}
  - {name: pv, core: aiv, sig: x}
  - {name: mm_aic, core: aic, sig: x}
  - {name: mm_aiv, core: aiv, sig: x}
`

// TestMixedKernels: mix: {aic, aiv0, aiv1} is upstream's
// rt_submit_task(MixedKernels{...}, args), each slot its own kernel or
// none, its shape upstream's ActiveMask::to_shape: two or more slots a
// MIX task (AIV0 + AIV1 without an AIC too), one slot an AIC or AIV task.
// The task is named by its first kernel and takes its launch flags.
func TestMixedKernels(t *testing.T) {
	src := mixHeader + `program:
  body:
    - {mix: {aic: qk, aiv0: sm, aiv1: pv}, args: ["inout x"]}
    - {mix: {aiv0: sm, aiv1: pv}, args: ["inout x"]}
    - {mix: {aic: qk, aiv0: sm}, args: ["inout x"]}
    - {mix: {aic: qk, aiv1: pv}, args: ["inout x"]}
    - {mix: {aic: qk}, args: ["inout x"]}
    - {mix: {aiv0: pv}, args: ["inout x"]}
    - {mix: {aiv1: sm}, args: ["inout x"]}
    - {mix: mm, args: ["inout x"]}
forms: {eager: {}}
`
	m, err := config.Parse("mix.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Kind, Name string
		K          []int
		Early      int
	}
	var got []row
	for _, tk := range reftrace.Tasks(expand(t, m, "eager")) {
		got = append(got, row{tk.Kind, tk.Name, tk.K, tk.Early})
	}
	want := []row{
		{"mix", "qk", []int{0, 1, 2}, 0},
		{"mix", "sm", []int{-1, 1, 2}, 1},
		{"mix", "qk", []int{0, 1, -1}, 0},
		{"mix", "qk", []int{0, -1, 2}, 0},
		{"aic", "qk", []int{0, -1, -1}, 0},
		{"aiv", "pv", []int{-1, 2, -1}, 0},
		{"aiv", "sm", []int{-1, -1, 1}, 1},
		{"mix", "mm_aic", []int{3, 4, 4}, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tasks\n%v, want\n%v", got, want)
	}
	if _, err := config.Validate(m); err != nil {
		t.Fatal(err)
	}
}

// TestMixedKernelsErrors: what MixedKernels cannot say is an error at its
// line.
func TestMixedKernelsErrors(t *testing.T) {
	op := func(s string) string { return "program:\n  body:\n    - " + s + "\nforms: {eager: {}}\n" }
	for _, tc := range []struct {
		name, src, at string
		want          []string
	}{
		{"no slot", op(`{mix: {}, args: ["inout x"]}`), "mix: {}", []string{"no kernel"}},
		{"unknown slot", op(`{mix: {aiv2: pv}, args: ["inout x"]}`), "aiv2", []string{`"aiv2": unknown key`}},
		{"an AIV kernel in the AIC slot", op(`{mix: {aic: sm, aiv0: pv}, args: ["inout x"]}`), "aic: sm", []string{`mix.aic "sm"`, "want an aic kernel here"}},
		{"an AIC kernel in an AIV slot", op(`{mix: {aic: qk, aiv1: qk}, args: ["inout x"]}`), "aiv1: qk", []string{`mix.aiv1 "qk"`}},
		{"unknown kernel", op(`{mix: {aic: qk, aiv0: nope}, args: ["inout x"]}`), "nope", []string{`mix.aiv0 "nope": unknown kernel`}},
		{"a list in a slot", op(`{mix: {aic: [qk], aiv0: sm}, args: ["inout x"]}`), "[qk]", []string{"want a kernel name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mixHeader + tc.src
			_, err := config.Parse("mix.yaml", []byte(src))
			wantConfigError(t, err, "mix.yaml", lineOf(src, tc.at), tc.want)
		})
	}
}
