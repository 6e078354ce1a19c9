package npu

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/hbg-dev/hbg/stages"
)

// TestCheckRules runs testdata/check: each case forges one run image the
// decoder would not make (the device must not trust that it did), names the
// rule that must refuse it and pins the refusal's message. Every one of
// check's rules has a case (the rules are found in the source, as the
// rule names of its refusals): a rule added without one fails here.
//
//	check base=synth|graph [upload=yes|no|wide] rule=<name>
//	<path> = <int> | @<path> | len(<path>)
//	...
//
// base=graph is graphForm's two GRAPH calls of blockDef; upload says whether
// the device holds that Definition (wide: one whose node no die can start
// as a cohort, so it does not read). A path walks the decoded
// stages.RunImage by field names and [index].
func TestCheckRules(t *testing.T) {
	covered := map[string]bool{}
	datadriven.RunTest(t, "testdata/check", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "check" {
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
		}
		var base, want string
		td.ScanArgs(t, "base", &base)
		td.MaybeScanArgs(t, "rule", &want)
		d, img := checkBase(t, td, base)
		for _, line := range strings.Split(td.Input, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				if err := forge(img, line); err != nil {
					t.Fatalf("%s: %q: %v", td.Pos, line, err)
				}
			}
		}
		var (
			p    *plan
			rule string
			err  error
		)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: check panicked: %v", td.Pos, r)
				}
			}()
			p, rule, err = d.checkRules(img)
		}()
		if err == nil {
			if want != "" {
				t.Errorf("%s: passed, want rule %s to refuse it", td.Pos, want)
			}
			return fmt.Sprintf("ok: %d tasks, %d objects, %d Graph instances\n", p.nTasks, p.nObjs, len(p.insts))
		}
		if p != nil {
			t.Errorf("%s: refused with a plan", td.Pos)
		}
		if rule != want {
			t.Errorf("%s: refused by rule %q, want %q", td.Pos, rule, want)
		} else {
			covered[rule] = true
		}
		return fmt.Sprintf("%s (%s): %v\n", rule, sentinels(err), err)
	})
	for _, r := range checkRuleNames(t) {
		if !covered[r] {
			t.Errorf("rule %s has no case in testdata/check", r)
		}
	}
}

// checkRuleNames reads check.go and check_rules.go: the rule name of every
// c.refuse call, in source order, and no refusal that is not one.
func checkRuleNames(t *testing.T) []string {
	fset := token.NewFileSet()
	var decls []ast.Decl
	for _, file := range []string{"check.go", "check_rules.go"} {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	var names []string
	for _, decl := range decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		named := fd.Recv != nil && fd.Name.Name == "refuse" // (*imageCheck).refuse itself
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				if fun.Sel.Name != "refuse" {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: a refusal whose rule is not a literal", fset.Position(call.Pos()))
					return true
				}
				name, _ := strconv.Unquote(lit.Value)
				names = append(names, name)
			case *ast.Ident:
				if fun.Name == "refuse" && !named {
					t.Errorf("%s: %s refuses without naming a rule (use c.refuse)", fset.Position(call.Pos()), fd.Name.Name)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatal("no rules found in check.go")
	}
	return names
}

func checkBase(t *testing.T, td *datadriven.TestData, base string) (*Die, *stages.RunImage) {
	d := newDevice(t)
	var b *builder
	switch base {
	case "synth":
		b = synth(synthOpts{})
	case "graph":
		upload := "yes"
		td.MaybeScanArgs(t, "upload", &upload)
		def := blockDef()
		b, _ = graphForm(def)
		switch upload {
		case "wide":
			// Uploaded under the hash the calls name, as a host would
			// upload what its store holds: the records do not read.
			def.Nodes[0].Launch = stages.LaunchSyncStart
			def.Nodes[0].BlockNum = maxBlockNum
			fallthrough
		case "yes":
			if _, err := d.Upload(stages.EncodeDefinition(def)); err != nil {
				t.Fatal(err)
			}
			if upload == "wide" {
				// The calls name the uploaded (wide) Definition.
				for i := range b.img.Graphs {
					b.img.Graphs[i].DefHash = stages.DefinitionHash(stages.EncodeDefinition(def))
				}
			}
		case "no":
		default:
			t.Fatalf("%s: upload=%s", td.Pos, upload)
		}
	default:
		t.Fatalf("%s: unknown base %q", td.Pos, base)
	}
	img, err := stages.DecodeRunImage(b.bytes())
	if err != nil {
		t.Fatal(err)
	}
	return d, img
}

// sentinels names the package's sentinel errors err is.
func sentinels(err error) string {
	var is []string
	for _, s := range []struct {
		name string
		err  error
	}{{"ErrInvalidImage", ErrInvalidImage}, {"ErrFanin", ErrFanin}, {"ErrCycle", ErrCycle},
		{"ErrUnknownDefinition", ErrUnknownDefinition}, {"ErrBoundaryMismatch", ErrBoundaryMismatch}} {
		if errors.Is(err, s.err) {
			is = append(is, s.name)
		}
	}
	var de *DefinitionError
	if errors.As(err, &de) {
		is = append(is, "DefinitionError")
	}
	return strings.Join(is, ", ")
}

// forge applies one "path = value" line to img.
func forge(img *stages.RunImage, line string) error {
	lhs, rhs, ok := strings.Cut(line, "=")
	if !ok {
		return errors.New("want <path> = <value>")
	}
	dst, err := walk(img, strings.TrimSpace(lhs))
	if err != nil {
		return err
	}
	rhs = strings.TrimSpace(rhs)
	switch {
	case strings.HasPrefix(rhs, "@"):
		src, err := walk(img, rhs[1:])
		if err != nil {
			return err
		}
		dst.Set(src)
		return nil
	case strings.HasPrefix(rhs, "len(") && strings.HasSuffix(rhs, ")"):
		src, err := walk(img, rhs[4:len(rhs)-1])
		if err != nil {
			return err
		}
		rhs = strconv.Itoa(src.Len())
	}
	n, err := strconv.ParseInt(rhs, 0, 64)
	if err != nil {
		return err
	}
	switch dst.Kind() {
	case reflect.Bool:
		dst.SetBool(n != 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		dst.SetUint(uint64(n))
	default:
		return fmt.Errorf("cannot set a %s to a number", dst.Type())
	}
	return nil
}

// walk finds a field of img by a path such as Tasks[1].Pred.View.NDims.
func walk(img *stages.RunImage, path string) (reflect.Value, error) {
	v := reflect.ValueOf(img).Elem()
	for _, part := range strings.Split(path, ".") {
		name, idx, _ := strings.Cut(part, "[")
		if v = v.FieldByName(name); !v.IsValid() {
			return v, fmt.Errorf("no field %s in %s", name, path)
		}
		for idx != "" {
			var rest string
			idx, rest, _ = strings.Cut(idx, "]")
			i, err := strconv.Atoi(idx)
			if err != nil || i < 0 || i >= v.Len() {
				return v, fmt.Errorf("bad index [%s] in %s", idx, path)
			}
			v, idx = v.Index(i), strings.TrimPrefix(rest, "[")
		}
	}
	return v, nil
}
