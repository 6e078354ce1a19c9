package trace

import (
	"fmt"
	"strings"
)

// Headline is the run in one line, what a reader wants first: the control
// plane per pass (warm median, else the cold passes'), the ordinary path's
// host_orch it replaces and the saving when the run measured it (compare's
// baseline), the golden verdict with the races, and the simulated device
// wall. For example:
//
//	dsv4_flash_decode full: control plane 0.240 ms per pass (warm median of 8); eager host_orch 7.31 ms, 30.5x saving; golden match, 0 races (1892 declared); device wall 68.479 ms (simulated)
func (r *Report) Headline() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", r.Model, r.Form)
	cp, class := r.Phases.ControlPlane, "warm"
	if cp.N == 0 {
		cp, class = r.ColdPhases.ControlPlane, "cold"
	}
	if cp.N == 0 {
		b.WriteString("control plane not measured")
	} else {
		fmt.Fprintf(&b, "control plane %s ms per pass (%s median of %d)", ms(cp.MedianNs), class, cp.N)
	}
	switch bl := r.Baseline; {
	case bl == nil:
		b.WriteString("; the ordinary path's host_orch not measured here (hbgrun compare measures it)")
	case bl.Form == r.Form:
		// The baseline's own host_orch over its control plane is no
		// saving: it is what the others are measured against.
		fmt.Fprintf(&b, "; %s is the ordinary path (host_orch %s ms)", bl.Form, ms(bl.HostOrchNs))
	case bl.Saving != nil:
		fmt.Fprintf(&b, "; %s host_orch %s ms, %.3gx saving", bl.Form, ms(bl.HostOrchNs), *bl.Saving)
	default:
		fmt.Fprintf(&b, "; %s host_orch %s ms", bl.Form, ms(bl.HostOrchNs))
	}
	if g := r.Golden; g != nil {
		fmt.Fprintf(&b, "; golden %s, %d races", g.Verdict, g.Races)
		if g.DeclaredRaces > 0 {
			fmt.Fprintf(&b, " (%d declared)", g.DeclaredRaces)
		}
		// A Graph form can order what its eager program leaves racing (a
		// body's calls are ordered by its outer task): "0 races" alone
		// would hide that the program it stands for races.
		if g.EagerRaces > 0 && g.Races == 0 {
			fmt.Fprintf(&b, ", but its eager form races (%s)", plural(g.EagerRaces, "race", "races"))
		}
	} else {
		fmt.Fprintf(&b, "; golden not checked")
	}
	if ns, ok := r.DeviceWall(); ok {
		fmt.Fprintf(&b, "; device wall %s ms (simulated)", ms(ns))
	} else {
		b.WriteString("; device skipped")
	}
	return b.String()
}

// DeviceWall is the simulated device wall of a pass: the first pass's
// (Sim) when known, else the warm median, else the cold one; false when
// no pass ran on the device.
func (r *Report) DeviceWall() (int64, bool) {
	if r.Sim != nil {
		return r.Sim.WallNs, true
	}
	for _, st := range []Stat{r.Phases.Phases[PhaseDeviceWall], r.ColdPhases.Phases[PhaseDeviceWall]} {
		if st.N > 0 {
			return st.MedianNs, true
		}
	}
	return 0, false
}

// plural is n with its noun: "1 race", "2 races".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
