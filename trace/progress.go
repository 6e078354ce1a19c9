package trace

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressDelay is how long a run goes before its progress bar appears: a
// bar that flashes for a short run is noise.
const ProgressDelay = time.Second

// Progress is a progress bar on stderr for a person watching a long run. It
// is silent unless stderr is a terminal (so CI logs, pipes and files never
// get escape codes) and until the run has lasted ProgressDelay. A nil
// *Progress is a valid no-op. Safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	out   io.Writer // nil: never shown
	now   func() time.Time
	start time.Time
	delay time.Duration
	total int64
	done  int64
	desc  string
	bar   *progressbar.ProgressBar
}

// NewProgress starts the progress of total steps (passes, say) described
// by desc.
func NewProgress(total int, desc string) *Progress {
	var out io.Writer
	if term.IsTerminal(int(os.Stderr.Fd())) {
		out = os.Stderr
	}
	return newProgress(out, total, desc, ProgressDelay, time.Now)
}

// newProgress is NewProgress with its surroundings injected: out nil means
// "not a terminal".
func newProgress(out io.Writer, total int, desc string, delay time.Duration, now func() time.Time) *Progress {
	return &Progress{out: out, now: now, start: now(), delay: delay, total: int64(total), desc: desc}
}

// Add marks n more steps done.
func (p *Progress) Add(n int) {
	if p == nil || p.out == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n)
	if p.bar == nil {
		if p.now().Sub(p.start) < p.delay {
			return
		}
		p.bar = progressbar.NewOptions64(p.total,
			progressbar.OptionSetWriter(p.out),
			progressbar.OptionSetDescription(p.desc),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
		)
		_ = p.bar.Set64(p.done) // a write error on a terminal is not worth failing a run for
		return
	}
	_ = p.bar.Add(n)
}

// Finish clears the bar, if it was shown, so that the report printed after
// it starts on a clean line.
func (p *Progress) Finish() {
	if p == nil || p.out == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
