package main

// The examples of README.md and docs/*.md, run: every command a page shows
// in a sh block is a line of a script in testdata/docs/*.txtar (or is
// marked "not run", with why), and every output a page shows after an
// "out:NAME" mark is compared with what the command prints (docout), so a
// page whose example went stale fails here.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/hbg-dev/hbg/internal/etcdtest"
)

func TestMain(m *testing.M) {
	// A real etcd for the cluster commands' tests runs as this binary.
	etcdtest.Main()
	// The scripts' hbgrun is this test binary running main.
	testscript.Main(m, map[string]func(){"hbgrun": main})
}

// repoRoot is the module's top directory, from this package's.
var repoRoot, _ = filepath.Abs("../..")

func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs DSv4 passes (-short)")
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/docs",
		Setup: func(env *testscript.Env) error {
			// The pages' paths are relative to the clone's top directory.
			for _, d := range []string{"config", "tests", "stages"} {
				if err := os.Symlink(filepath.Join(repoRoot, d), filepath.Join(env.WorkDir, d)); err != nil {
					return err
				}
			}
			env.Setenv("HBG_STORE", filepath.Join(env.WorkDir, "store")) // a fresh store: the first run records
			env.Setenv("ROOT", repoRoot)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"docout": docoutCmd,
		},
	})
}

// docoutCmd is `docout PAGE NAME stdout|stderr|FILE...`: the output the
// page shows after its <!-- out:NAME --> mark is what the last command
// printed there (or the files, one after the other: cp stderr FILE keeps
// an earlier command's).
func docoutCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 {
		ts.Fatalf("usage: docout PAGE NAME stdout|stderr|FILE...")
	}
	block, err := docBlock(filepath.Join(repoRoot, args[0]), args[1])
	ts.Check(err)
	var got strings.Builder
	for _, f := range args[2:] {
		got.WriteString(ts.ReadFile(f))
	}
	err = matchDoc(block, got.String())
	switch {
	case err != nil && !neg:
		ts.Fatalf("%s, out:%s is stale: %v", args[0], args[1], err)
	case err == nil && neg:
		ts.Fatalf("%s, out:%s matched", args[0], args[1])
	}
}

// docBlock is the fenced block after <!-- out:name --> in a page.
func docBlock(page, name string) (string, error) {
	b, err := os.ReadFile(page)
	if err != nil {
		return "", err
	}
	mark := "<!-- out:" + name + " -->"
	_, rest, ok := strings.Cut(string(b), mark)
	if !ok {
		return "", fmt.Errorf("%s has no %s", page, mark)
	}
	rest = strings.TrimLeft(rest, "\n")
	// A block in a list item is indented: its lines lose the fence's indent.
	indent := rest[:len(rest)-len(strings.TrimLeft(rest, " "))]
	rest = rest[len(indent):]
	if !strings.HasPrefix(rest, "```") {
		return "", fmt.Errorf("%s: %s is not followed by a fenced block", page, mark)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	block, _, ok := strings.Cut(rest, indent+"```\n")
	if !ok {
		return "", fmt.Errorf("%s: the block after %s does not end", page, mark)
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(block, "\n") {
		out.WriteString(strings.TrimPrefix(l, indent))
	}
	return out.String(), nil
}

// decimal is a figure that varies run to run (a time, a share): the
// pages' outputs match any decimal there. Integers (counts, digests, task
// numbers) must be the same.
var decimal = regexp.MustCompile(`[0-9]+\.[0-9]+`)

// trailingInt is a line's last field when it is an integer: after a
// decimal, a table's column of nanoseconds (mean_ns) or a pass count, which
// vary too.
var trailingInt = regexp.MustCompile(` +[0-9]+$`)

// docPattern makes a page's output a pattern: a line "..." stands for any
// lines, a decimal number for any, so does a line's last integer after a
// decimal (mean_ns), a run of spaces for any (columns realign when a figure
// grows), the rest literal.
func docPattern(block string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A`)
	for _, line := range strings.SplitAfter(block, "\n") {
		if line == "" {
			continue
		}
		if strings.TrimSpace(line) == "..." {
			b.WriteString(`(?:.*\n)*?`)
			continue
		}
		body, nl := strings.CutSuffix(line, "\n")
		last := 0
		tail := ""
		ms := decimal.FindAllStringIndex(body, -1)
		if m := trailingInt.FindStringIndex(body); m != nil && len(ms) > 0 && ms[len(ms)-1][1] <= m[0] {
			// A table's last column of ns after its ms (mean_ns) varies.
			tail, body = ` +[0-9]+`, body[:m[0]]
		}
		for _, m := range ms {
			b.WriteString(spaced(body[last:m[0]]))
			// A varying figure may print with no decimals where the page
			// has some: compare's saving is %.3g, "39.9x" on one run and
			// "130x" on a busier one.
			b.WriteString(`[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?`)
			last = m[1]
		}
		b.WriteString(spaced(body[last:]))
		b.WriteString(tail)
		if nl {
			b.WriteString("\n")
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

var spaces = regexp.MustCompile(` +`)

func spaced(s string) string {
	parts := spaces.Split(s, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return strings.Join(parts, ` +`)
}

// matchDoc says where got first departs from the page's block.
func matchDoc(block, got string) error {
	if docPattern(block).MatchString(got) {
		return nil
	}
	// Name the first line of the block that no longer matches in order.
	lines := strings.SplitAfter(block, "\n")
	for i := range lines {
		prefix := strings.Join(lines[:i+1], "") + "...\n"
		if !docPattern(prefix).MatchString(got) {
			return fmt.Errorf("the page's line %q is not what the command printed:\n%s", strings.TrimSuffix(lines[i], "\n"), got)
		}
	}
	return fmt.Errorf("the command printed more than the page shows:\n%s", got)
}

// TestDocOutputStale: a page's output that differs from the command's in
// anything but its varying figures fails (a word, a count, a line more or
// less), and a decimal that varies does not.
func TestDocOutputStale(t *testing.T) {
	block, err := docBlock(filepath.Join(repoRoot, "README.md"), "make-run")
	if err != nil {
		t.Fatal(err)
	}
	got := block // the page as the command's output: it matches itself
	if err := matchDoc(block, strings.Replace(got, "...\n", "host_orch ops\n", 1)); err != nil {
		t.Fatalf("the page does not match its own output: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"a word", "golden match", "golden mismatch"},
		{"a count", "device_tasks 15972", "device_tasks 15971"},
		{"a plural", "x 1 rank,", "x 1 ranks,"},
		{"a line dropped", "warm passes: 4\n", ""},
	} {
		changed := strings.Replace(got, tc.old, tc.new, 1)
		if changed == got {
			t.Fatalf("%s: %q is not in the block", tc.name, tc.old)
		}
		if matchDoc(block, strings.Replace(changed, "...\n", "", 1)) == nil {
			t.Errorf("%s changed (%q to %q) and the page still matched", tc.name, tc.old, tc.new)
		}
	}
	varied := decimal.ReplaceAllString(strings.Replace(got, "...\n", "", 1), "12.345")
	if err := matchDoc(block, varied); err != nil {
		t.Errorf("a run with other times did not match: %v", err)
	}
}

// docPages are the pages whose examples must run.
func docPages(t *testing.T) []string {
	pages := []string{filepath.Join(repoRoot, "README.md")}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		if filepath.Base(p) == "benchmarks-history.md" {
			continue // a record of past runs, not examples
		}
		pages = append(pages, p)
	}
	return pages
}

// TestDocCommandsRun: every hbgrun or make command in a page's sh block is
// run by a script (make run as its Makefile recipe), unless the block is
// marked <!-- not run: why -->; every out:NAME mark is checked by a docout.
func TestDocCommandsRun(t *testing.T) {
	scripts, err := filepath.Glob("testdata/docs/*.txtar")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in testdata/docs (%v)", err)
	}
	run := map[string]bool{}
	checked := map[string]bool{}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "-- ") {
				break // the archive's files
			}
			f := strings.Fields(line)
			for len(f) > 0 && (f[0] == "!" || strings.HasPrefix(f[0], "[")) {
				f = f[1:]
			}
			if len(f) > 1 && f[0] == "exec" {
				run[strings.Join(f[1:], " ")] = true
			}
			if len(f) >= 4 && f[0] == "docout" {
				checked[f[1]+" "+f[2]] = true
			}
		}
	}
	makeRun := makeRecipe(t, "run")
	for _, page := range docPages(t) {
		rel, _ := filepath.Rel(repoRoot, page)
		for _, c := range pageCommands(t, page) {
			cmd := c.text
			if cmd == "make run" {
				cmd = makeRun
			}
			if !run[cmd] {
				t.Errorf("%s:%d: %q is run by no script in testdata/docs (or mark its block <!-- not run: why -->)", rel, c.line, c.text)
			}
		}
		for _, name := range pageMarks(t, page) {
			if !checked[rel+" "+name] {
				t.Errorf("%s: out:%s is checked by no docout in testdata/docs", rel, name)
			}
		}
	}
}

type pageCommand struct {
	line int
	text string
}

// pageCommands is a page's hbgrun and make lines in sh blocks that are not
// marked "not run": without a "$ " prompt or a trailing comment, and with
// continuation lines joined.
func pageCommands(t *testing.T, page string) []pageCommand {
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pageCommand
	var inSh, skip bool
	prev := ""
	var pending *pageCommand
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			if inSh || strings.TrimSpace(line) != "```sh" {
				inSh = false
			} else {
				inSh, skip = true, strings.HasPrefix(prev, "<!-- not run:")
			}
		case inSh && !skip:
			l := strings.TrimPrefix(line, "$ ")
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			l = strings.TrimSpace(l)
			if r, ok := strings.CutPrefix(l, "go run ./cmd/hbgrun "); ok {
				l = "hbgrun " + r
			}
			// "> FILE" is the script's exec and cp stdout FILE.
			if i := strings.Index(l, " > "); i >= 0 {
				l = l[:i]
			}
			if pending != nil {
				pending.text += " " + strings.TrimSuffix(l, `\`)
				pending.text = strings.Join(strings.Fields(pending.text), " ")
				if !strings.HasSuffix(l, `\`) {
					out = append(out, *pending)
					pending = nil
				}
				continue
			}
			if strings.HasPrefix(l, "hbgrun ") || strings.HasPrefix(l, "make ") {
				c := pageCommand{n, strings.Join(strings.Fields(strings.TrimSuffix(l, `\`)), " ")}
				if strings.HasSuffix(l, `\`) {
					pending = &c
				} else {
					out = append(out, c)
				}
			}
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	return out
}

var outMark = regexp.MustCompile(`<!-- out:([A-Za-z0-9_-]+) -->`)

func pageMarks(t *testing.T, page string) []string {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range outMark.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// makeRecipe is the Makefile target's command as a user types it: its go
// run ./cmd/hbgrun as hbgrun, $(MODEL) as the Makefile's default.
func makeRecipe(t *testing.T, target string) string {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	model := regexp.MustCompile(`(?m)^MODEL \?= (.*)$`).FindStringSubmatch(string(b))
	recipe := regexp.MustCompile(`(?m)^` + target + `:.*\n\t(.*)$`).FindStringSubmatch(string(b))
	if model == nil || recipe == nil {
		t.Fatalf("Makefile: no MODEL or %s target", target)
	}
	r := strings.ReplaceAll(recipe[1], "$(GO) run ./cmd/hbgrun", "hbgrun")
	return strings.ReplaceAll(r, "$(MODEL)", model[1])
}

var exampleMark = regexp.MustCompile("(?s)<!-- example: ([^ ]+) -->\n```go\n(.*?)```\n")

// TestDocExamples: a page's Go code after <!-- example: FILE --> is FILE's
// text, so the page shows code that compiles and whose Output is checked.
func TestDocExamples(t *testing.T) {
	n := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, page)
		for _, m := range exampleMark.FindAllStringSubmatch(string(b), -1) {
			n++
			src, err := os.ReadFile(filepath.Join(repoRoot, m[1]))
			if err != nil {
				t.Errorf("%s: %v", rel, err)
				continue
			}
			if !strings.Contains(string(src), m[2]) {
				t.Errorf("%s: its example is not %s's text (copy it again)", rel, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no page shows an example (docs/embedding.md did)")
	}
}
