package stages

// DeviceAxis places one rank's passes on its simulated device's timeline,
// with the host's control plane on the same axis, to say how long the device
// idles before each pass, waiting for the host (device_idle).
//
// The device runs pass N for its simulated wall sim_N, from
// S_N = max(E_{N-1}, H_N) to E_N = S_N + sim_N: it starts once it is free and
// the pass's run image is on it. H_N, when the host has that image on the
// device, is B_N + (ready_N - begin_N): the pass's real control plane, from
// the start of its host_orch (begin_N) to the end of its copy (ready_N, the
// real time it was shipped plus arena_h2d), laid from B_N, the point of the
// axis where its host_orch began. The host's real time runs 1:1 on the axis
// from the last thing it waited for:
//
//   - E_k + (begin_N - answer_k) when an answer came between begin_{N-1}
//     and begin_N, k the latest one (real time answer_k): the host waited
//     for it (the caller asks for pass N once it has pass k's result, or the
//     rank had no room), and that answer left the device at E_k;
//   - else B_{N-1} + (begin_N - begin_{N-1}): the host went straight on from
//     the previous pass, orchestrating passes in order on one actor.
//
// device_idle_N = S_N - E_{N-1}. When host and device take turns
// (--in-flight 1), each pass begins after the previous answer, and the
// device idles for the whole control plane; with overlap, the next pass's
// control plane runs under the device's wall and the idle time is 0 whenever
// it is shorter. The first pass's idle time is its control plane (E_{-1} = 0
// at its begin).
type DeviceAxis struct {
	placed    bool
	begin     int64 // B_{N-1}
	realBegin int64 // begin_{N-1}
	end       int64 // E_{N-1}
	answers   [8]axisAnswer
	n         int
}

type axisAnswer struct{ end, real int64 }

// Place places the next pass (in launch order): when its host_orch began,
// when its run image was on the device (real ns, one clock), and its
// simulated wall. It returns the device's idle time before the pass.
func (a *DeviceAxis) Place(begin, ready, sim int64) (idle int64) {
	b := int64(0)
	if a.placed {
		b = a.begin + (begin - a.realBegin)
	}
	var last *axisAnswer
	for i := 0; i < min(a.n, len(a.answers)); i++ {
		if an := &a.answers[i]; an.real <= begin && (last == nil || an.real > last.real) {
			last = an
		}
	}
	if last != nil && (!a.placed || last.real >= a.realBegin) {
		b = last.end + (begin - last.real)
	}
	h := b + (ready - begin)
	start := max(a.end, h)
	idle = start - a.end
	a.placed, a.begin, a.realBegin = true, b, begin
	a.end = start + sim
	return idle
}

// Answered records that the pass placed last was answered at real time at.
func (a *DeviceAxis) Answered(at int64) {
	a.answers[a.n%len(a.answers)] = axisAnswer{end: a.end, real: at}
	a.n++
}
