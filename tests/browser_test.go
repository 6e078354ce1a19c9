package tests

// The HTML report in a real browser: headless Chromium (Debian's chromium,
// installed by `make chromium`, which `make test` runs) driven by chromedp
// loads the page of a DSv4 compare and of a run on two ranks, and checks
// that it renders without a console error, that the headline figures the
// browser shows are the run's JSON, and that its screenshot is not blank.
// The screenshots are kept in tests/artifacts/ (not committed) for a
// person to look at.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds the browser; without one the test fails under CI
// (make test installs it) and is skipped elsewhere, naming the target.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: make test installs it (make chromium)")
	}
	t.Skip("no chromium on PATH: run make chromium (Debian's chromium package)")
	return ""
}

// browser starts one headless Chromium for a test, with a fresh profile
// and nothing that reaches the network on its own; the page's load and
// checks get 3 minutes.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1300, 1000),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// shownPage is what the browser made of a report page.
type shownPage struct {
	// Facts are every form's headline figures: form -> field -> value.
	Facts map[string]map[string]string
	// Texts are the same figures as a person reads them.
	Texts map[string]map[string]string
	// Console is every console message of level error, and every
	// uncaught exception.
	Console []string
	PNG     []byte
	// TextFaults are the page's texts that overlap another text of their
	// chart or lie outside their chart or the page (clipped), each said.
	TextFaults []string
}

// textFaults is the check of every chart's text boxes: within one svg no
// two texts intersect, and each lies inside its svg (which clips) and
// inside the page; the page's own headings and figures lie inside the
// page.
const textFaults = `(() => {
  const out = [], page = document.documentElement.getBoundingClientRect();
  const pw = Math.max(document.documentElement.scrollWidth, page.width);
  const inside = (r, b) => r.left >= b.left - 0.5 && r.right <= b.right + 0.5 && r.top >= b.top - 0.5 && r.bottom <= b.bottom + 0.5;
  const pageBox = {left: page.left, right: page.left + pw, top: page.top, bottom: page.top + document.documentElement.scrollHeight};
  document.querySelectorAll('svg').forEach((svg, si) => {
    const sb = svg.getBoundingClientRect();
    const ts = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent, t.getBBox && t.getBoundingClientRect()]);
    ts.forEach(([s, r], i) => {
      if (!inside(r, sb)) out.push('chart ' + si + ': "' + s + '" outside its chart');
      if (!inside(r, pageBox)) out.push('chart ' + si + ': "' + s + '" outside the page');
      for (let j = i + 1; j < ts.length; j++) {
        const [s2, q] = ts[j];
        if (r.left < q.right - 0.5 && q.left < r.right - 0.5 && r.top < q.bottom - 0.5 && q.top < r.bottom - 0.5)
          out.push('chart ' + si + ': "' + s + '" overlaps "' + s2 + '"');
      }
    });
  });
  document.querySelectorAll('h1, h2, h3, .fact, p, td, th').forEach(e => {
    if (!inside(e.getBoundingClientRect(), pageBox)) out.push(e.tagName + ' "' + e.innerText.slice(0, 40) + '" outside the page');
  });
  return out;
})()`

// load opens file in the browser and reads the page back.
func load(t *testing.T, ctx context.Context, file string) shownPage {
	t.Helper()
	var mu sync.Mutex
	var sp shownPage
	cctx, stop := context.WithCancel(ctx)
	msgs := chromedp.Console(cctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				sp.Console = append(sp.Console, m.String())
				mu.Unlock()
			}
		}
	}()
	abs, err := filepath.Abs(file)
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+abs)))
	type fact struct{ Form, Field, Value, Text string }
	facts, err := chromedp.Run(ctx, chromedp.Evaluate[[]fact](`Array.from(document.querySelectorAll('section.form .headline [data-field]')).map(e => ({
		Form: e.closest('section.form').dataset.form, Field: e.dataset.field, Value: e.dataset.value, Text: e.innerText}))`))
	require.NoError(t, err)
	sp.Facts, sp.Texts = map[string]map[string]string{}, map[string]map[string]string{}
	for _, f := range facts {
		if sp.Facts[f.Form] == nil {
			sp.Facts[f.Form], sp.Texts[f.Form] = map[string]string{}, map[string]string{}
		}
		sp.Facts[f.Form][f.Field], sp.Texts[f.Form][f.Field] = f.Value, f.Text
	}
	sp.TextFaults, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](textFaults))
	require.NoError(t, err)
	sp.PNG, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	stop()
	<-done
	return sp
}

// blank says why a screenshot shows nothing ("" when it shows something):
// too few colours, too little that is not the page's white, too small.
func blank(b []byte) string {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return err.Error()
	}
	bounds := img.Bounds()
	colours := map[[3]uint32]bool{}
	inked, total := 0, 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			if r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
				inked++
			}
			total++
		}
	}
	switch {
	case bounds.Dx() < 1000 || bounds.Dy() < 600:
		return fmt.Sprintf("%dx%d pixels", bounds.Dx(), bounds.Dy())
	case len(colours) < 20:
		return fmt.Sprintf("%d colours", len(colours))
	case inked*50 < total:
		return fmt.Sprintf("%d of %d pixels sampled have ink", inked, total)
	}
	return ""
}

// artifact keeps a screenshot for a person to look at.
func artifact(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := filepath.Join(jaegerRepoRoot(t), "tests", "artifacts")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	t.Logf("screenshot: %s", p)
}

// reportJSON is what the headline is checked against.
type reportJSON struct {
	Form   string `json:"form"`
	Phases struct {
		ControlPlane struct {
			MedianNs int64 `json:"median_ns"`
			N        int   `json:"n"`
		} `json:"control_plane"`
		DeviceWall struct {
			MedianNs int64 `json:"median_ns"`
		} `json:"device_wall"`
	} `json:"phases"`
	Golden *struct {
		Verdict string `json:"verdict"`
		Races   int    `json:"race_count"`
	} `json:"golden"`
	Sim *struct {
		WallNs int64 `json:"wall_ns"`
	} `json:"sim"`
	Baseline *struct {
		Form       string   `json:"form"`
		HostOrchNs int64    `json:"host_orch_ns"`
		Saving     *float64 `json:"saving"`
	} `json:"baseline"`
	Timeline *struct {
		Cores []json.RawMessage `json:"cores"`
	} `json:"timeline"`
}

// checkHeadline: the browser shows the JSON's figures.
func checkHeadline(t *testing.T, sp shownPage, r reportJSON) {
	t.Helper()
	f := sp.Facts[r.Form]
	require.NotNil(t, f, "form %s has no headline on the page (%v)", r.Form, sp.Facts)
	require.Positive(t, r.Phases.ControlPlane.N)
	assert.Equal(t, strconv.FormatInt(r.Phases.ControlPlane.MedianNs, 10), f["control_plane_median_ns"])
	assert.Equal(t, fmt.Sprintf("%.3f ms", float64(r.Phases.ControlPlane.MedianNs)/1e6)[:4], sp.Texts[r.Form]["control_plane_median_ns"][:4])
	require.NotNil(t, r.Golden)
	assert.Equal(t, r.Golden.Verdict, f["golden_verdict"])
	assert.Equal(t, strconv.Itoa(r.Golden.Races), f["races"])
	wall := r.Phases.DeviceWall.MedianNs
	if r.Sim != nil {
		wall = r.Sim.WallNs
	}
	assert.Equal(t, strconv.FormatInt(wall, 10), f["device_wall_ns"])
	if b := r.Baseline; b != nil {
		assert.Equal(t, strconv.FormatInt(b.HostOrchNs, 10), f["baseline_host_orch_ns"])
		if b.Form == r.Form {
			// The baseline's own host_orch over its control plane is no
			// saving, and the page does not call it one.
			assert.Nil(t, b.Saving)
			assert.NotContains(t, f, "saving")
		} else {
			require.NotNil(t, b.Saving)
			got, err := strconv.ParseFloat(f["saving"], 64)
			require.NoError(t, err)
			assert.Equal(t, *b.Saving, got)
		}
	}
	require.NotNil(t, r.Timeline, "the run kept no device timeline")
	assert.NotEmpty(t, r.Timeline.Cores)
}

func TestBrowserReportRunTwoRanks(t *testing.T) {
	chromiumPath(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "run.html")
	out, stderr, code := runCLI(t, "run", "--rounds", "3", "--ranks", "2", "--json", "--html", page, "--store", "off")
	require.Equal(t, 0, code, stderr)
	var r reportJSON
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	sp := load(t, browser(t), page)
	artifact(t, "report-run-ranks2.png", sp.PNG)
	assert.Empty(t, sp.Console, "console errors")
	assert.Empty(t, sp.TextFaults, "texts that overlap or are clipped")
	checkHeadline(t, sp, r)
	assert.Empty(t, blank(sp.PNG), "the screenshot is blank")

	// The saved JSON draws the same page.
	saved := filepath.Join(dir, "run.json")
	require.NoError(t, os.WriteFile(saved, []byte(out), 0o644))
	_, stderr, code = runCLI(t, "report", saved, "-o", filepath.Join(dir, "again.html"))
	require.Equal(t, 0, code, stderr)
	a, err := os.ReadFile(page)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "again.html"))
	require.NoError(t, err)
	assert.Equal(t, a, b, "hbgrun report RUN.json draws what run --html drew")
}

func TestBrowserReportCompare(t *testing.T) {
	chromiumPath(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "compare.html")
	// The four forms the page's screenshot shows (docs/img), within the
	// page's size bound; step is a fifth.
	out, stderr, code := runCLI(t, "compare", "--forms", "eager,pair,blocks,full", "--rounds", "3", "--json", "--html", page, "--store", "off")
	require.Equal(t, 0, code, stderr)
	var doc struct {
		Forms []reportJSON `json:"forms"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Forms, 4, "DSv4's eager, pair, blocks and full")
	st, err := os.Stat(page)
	require.NoError(t, err)
	// Each form's device timeline is drawn; the page drew 15.6 MB of rects
	// before they were merged to the pixel.
	assert.LessOrEqual(t, st.Size(), int64(3<<20), "the compare page is %d bytes", st.Size())
	sp := load(t, browser(t), page)
	artifact(t, "report-compare-dsv4.png", sp.PNG)
	assert.Empty(t, sp.Console, "console errors")
	assert.Empty(t, sp.TextFaults, "texts that overlap or are clipped")
	for _, r := range doc.Forms {
		checkHeadline(t, sp, r)
	}
	assert.Empty(t, blank(sp.PNG), "the screenshot is blank")
}

// TestBrowserCatchesConsoleErrors: the console check sees a page's error
// and its uncaught exception, and the blank check a blank page, so the
// tests above can fail.
func TestBrowserCatchesConsoleErrors(t *testing.T) {
	ctx := browser(t)
	page := filepath.Join(t.TempDir(), "bad.html")
	require.NoError(t, os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><p>x</p><script>console.error("broken chart"); null.x;</script></body></html>`), 0o644))
	sp := load(t, ctx, page)
	require.Len(t, sp.Console, 2, "%v", sp.Console)
	assert.Contains(t, sp.Console[0], "broken chart")
	assert.NotEmpty(t, blank(sp.PNG), "a page of one word is blank")

	// The text check sees the old timeline's faults: "idle" and "0" run
	// together, and a top row label clipped by its chart.
	require.NoError(t, os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><svg width="200" height="40"><text x="2" y="6">aic 0</text><text x="60" y="30">idle</text><text x="70" y="30">0</text></svg></body></html>`), 0o644))
	sp = load(t, browser(t), page)
	assert.Len(t, sp.TextFaults, 2, "%v", sp.TextFaults)
}

// TestBrowserReportServing: a run whose keys change (the Qwen3 serving
// model) under a residency budget draws its Definitions alive over rounds
// as one line of a point a round, inside its chart, with nothing
// overlapping; the counts table shows the evictions the JSON has.
func TestBrowserReportServing(t *testing.T) {
	chromiumPath(t)
	page := filepath.Join(t.TempDir(), "serving.html")
	const rounds = 30
	out, stderr, code := runCLI(t, "run", "../config/models/qwen3_14b_decode_serving.yaml", "--form", "graph", "--rounds", strconv.Itoa(rounds),
		"--keep-definitions", "2", "--skip-device", "--store", "off", "--json", "--html", page)
	require.Equal(t, 0, code, stderr)
	var r struct {
		Counts struct {
			PerRun struct {
				Evicted int   `json:"evicted_definitions"`
				Alive   []int `json:"definitions_alive"`
			} `json:"per_run"`
		} `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Counts.PerRun.Alive, rounds)
	require.Positive(t, r.Counts.PerRun.Evicted, "a budget of 2 below the working set evicts")
	sp := load(t, browser(t), page)
	artifact(t, "report-serving.png", sp.PNG)
	assert.Empty(t, sp.Console, "console errors")
	assert.Empty(t, sp.TextFaults, "texts that overlap or are clipped")
	type line struct {
		Points          int
		Inside          bool
		Evicted, Rounds string
	}
	// A browser of its own: load's ends with the page it read.
	ctx := browser(t)
	abs, err := filepath.Abs(page)
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+abs)))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[line](`(() => {
  const l = document.querySelector('polyline.alive');
  if (!l) return {Points: 0, Inside: false, Evicted: '', Rounds: ''};
  const b = l.getBoundingClientRect(), s = l.ownerSVGElement.getBoundingClientRect();
  return {Points: l.points.numberOfItems, Inside: b.left >= s.left && b.right <= s.right && b.top >= s.top - 1 && b.bottom <= s.bottom + 1,
    Evicted: document.querySelector('table.counts [data-field="evicted_definitions"]').dataset.value, Rounds: l.dataset.rounds};
})()`))
	require.NoError(t, err)
	assert.Equal(t, rounds, got.Points)
	assert.True(t, got.Inside, "the line leaves its chart")
	assert.Equal(t, strconv.Itoa(r.Counts.PerRun.Evicted), got.Evicted)
	assert.Equal(t, strconv.Itoa(rounds), got.Rounds)
}
