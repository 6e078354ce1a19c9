package stages

// PhaseClock is one pass's control-plane arithmetic as a pure stage: the
// shells read the clock (trace.Now, one monotonic axis in ns) and feed it
// the readings; the clock says how much of the pass's time is host_orch's,
// graph_upload's and arena_h2d's, and when the run image was on the device.
// It lives with the pass across its reruns (the actors' passRun; the pass
// scripts, testdata/pass/clock).
//
// The rule it keeps: every nanosecond of the control plane is counted once.
// A pass is orchestrated, then graph_upload opens and stays open until the
// run image ships. A rerun (a key fell back, or the device refused a
// Definition) is orchestrated again:
//
//   - before the ship, inside the open graph_upload span: its time is
//     host_orch's, and graph_upload's figure leaves it out;
//   - after the ship (graph_upload closed): its time is host_orch's, and
//     graph_upload opens again after it, keeping what it had.
//
// So host_orch + graph_upload + arena_h2d never exceeds the wall the
// caller waited, and a slow rerun shows in host_orch alone.
type PhaseClock struct {
	// HostOrch, GraphUpload and ArenaH2D are the phases' figures (ns).
	HostOrch, GraphUpload, ArenaH2D int64
	// Begin is when host_orch began; Ship when the run image was sent to
	// the device (0 until it was). They place the pass on the device's
	// timeline (DeviceAxis.Place).
	Begin, Ship int64

	begun     bool
	uploading bool  // graph_upload is open
	uploadAt  int64 // when it opened
	rerunIn   int64 // reruns' orchestration inside the open graph_upload
}

// Orchestrated says an orchestration of the pass ran from begin to end:
// the first one, or a rerun. It returns whether graph_upload opens after
// it (the first orchestration, or a rerun after the ship); the shell then
// opens the span and calls UploadOpened with its start.
func (c *PhaseClock) Orchestrated(begin, end int64) (openUpload bool) {
	ns := end - begin
	if ns < 0 {
		panic("stages: PhaseClock: an orchestration ended before it began")
	}
	if !c.begun {
		c.begun, c.Begin, c.HostOrch = true, begin, ns
		return true
	}
	c.HostOrch += ns
	if c.uploading {
		c.rerunIn += ns
		return false
	}
	return true
}

// UploadOpened says graph_upload opened at at.
func (c *PhaseClock) UploadOpened(at int64) {
	if c.uploading {
		panic("stages: PhaseClock: graph_upload opened twice")
	}
	c.uploading, c.uploadAt = true, at
}

// Uploading reports whether graph_upload is open.
func (c *PhaseClock) Uploading() bool { return c.uploading }

// UploadClosed says graph_upload closed at at (the pass shipped, or failed
// before it could): its figure is what it had, plus this opening's span,
// less the reruns orchestrated inside it.
func (c *PhaseClock) UploadClosed(at int64) {
	if !c.uploading {
		panic("stages: PhaseClock: graph_upload closed but not open")
	}
	c.GraphUpload += at - c.uploadAt - c.rerunIn
	c.uploading, c.rerunIn = false, 0
}

// Shipped says the run image was sent to the device at at, which closes
// graph_upload.
func (c *PhaseClock) Shipped(at int64) {
	c.UploadClosed(at)
	c.Ship = at
}

// Copied says the device took ns to copy the run image in (arena_h2d, as
// the device measured it).
func (c *PhaseClock) Copied(ns int64) { c.ArenaH2D = ns }

// Ready is when the run image was on the device: its ship plus its copy.
func (c *PhaseClock) Ready() int64 { return c.Ship + c.ArenaH2D }
