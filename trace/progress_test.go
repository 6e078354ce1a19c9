package trace

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/term"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressAppearsOnlyAfterTheDelay(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	p := newProgress(&out, 10, "passes", time.Second, clock.now)

	p.Add(1)
	clock.t = clock.t.Add(999 * time.Millisecond)
	p.Add(1)
	assert.Empty(t, out.String(), "a run shorter than the delay shows nothing")

	clock.t = clock.t.Add(time.Millisecond)
	p.Add(1)
	assert.Contains(t, out.String(), "passes")
	assert.Contains(t, out.String(), "3/10", "the bar starts at the steps already done")
	p.Add(7)
	p.Finish()
}

func TestProgressSilentWithoutTerminal(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newProgress(nil, 10, "passes", 0, clock.now)
	p.Add(5) // no writer, nothing to write to: must not panic
	p.Finish()

	var nilP *Progress
	nilP.Add(1)
	nilP.Finish()
}

// NewProgress writes to stderr only when it is a terminal (under CI it is
// not).
func TestNewProgressOnlyOnATerminal(t *testing.T) {
	p := NewProgress(3, "passes")
	assert.Equal(t, term.IsTerminal(int(os.Stderr.Fd())), p.out != nil)
	p.Add(3)
	p.Finish()
}
