package trace

// PhaseRatios is one form's warm median per phase (and control plane) over
// the baseline form's: what `hbgrun compare` prints in parentheses. A ratio
// is null (nil) where the baseline's median is 0 or either phase was not
// measured. Ratios have no unit.
type PhaseRatios struct {
	Args         *float64 `json:"args"`
	HostOrch     *float64 `json:"host_orch"`
	GraphUpload  *float64 `json:"graph_upload"`
	ArenaH2D     *float64 `json:"arena_h2d"`
	DeviceWall   *float64 `json:"device_wall"`
	ControlPlane *float64 `json:"control_plane"`
	// Saving is the baseline's host_orch over this form's control plane:
	// how many of this form's steps the baseline's orchestration alone
	// would pay for (upstream's headline, eager host_orch over a Graph
	// form's warm control plane).
	Saving *float64 `json:"saving"`
}

// Ratio is a/b, or nil when b is not positive or either was not measured.
func Ratio(a, b Stat) *float64 {
	if a.N == 0 || b.N == 0 || b.MedianNs <= 0 {
		return nil
	}
	r := float64(a.MedianNs) / float64(b.MedianNs)
	return &r
}

// MedianRatios compares r's warm medians with base's.
func MedianRatios(r, base *Report) PhaseRatios {
	p, b := &r.Phases, &base.Phases
	return PhaseRatios{
		Args:         Ratio(p.Phases[PhaseArgs], b.Phases[PhaseArgs]),
		HostOrch:     Ratio(p.Phases[PhaseHostOrch], b.Phases[PhaseHostOrch]),
		GraphUpload:  Ratio(p.Phases[PhaseGraphUpload], b.Phases[PhaseGraphUpload]),
		ArenaH2D:     Ratio(p.Phases[PhaseArenaH2D], b.Phases[PhaseArenaH2D]),
		DeviceWall:   Ratio(p.Phases[PhaseDeviceWall], b.Phases[PhaseDeviceWall]),
		ControlPlane: Ratio(p.ControlPlane, b.ControlPlane),
		Saving:       Ratio(b.Phases[PhaseHostOrch], p.ControlPlane),
	}
}

// Phase gives one phase's ratio.
func (pr *PhaseRatios) Phase(ph Phase) *float64 {
	return [NumPhases]*float64{pr.Args, pr.HostOrch, pr.GraphUpload, pr.ArenaH2D, pr.DeviceWall}[ph]
}
