package trace

import (
	"cmp"
	"fmt"
	"slices"
)

// DeviceTimeline is one pass's simulated device, core by core, cut down
// to what a picture of Width columns can show: a slice at least one
// column wide is kept as it is, and runs of narrower slices on a core are
// merged into one segment per column, named by the Graph key that kept
// the core busiest there. DSv4's 15972 tasks become a few thousand
// segments, and the report's JSON stays small.
type DeviceTimeline struct {
	Rank  int `json:"rank"`
	Round int `json:"round"`
	// Median says the pass is the rank's median warm pass by device time
	// (idle before it plus its wall) of Of warm passes; false, the rank's
	// cold pass (no warm pass ran).
	Median bool `json:"median_warm,omitempty"`
	Of     int  `json:"of_passes,omitempty"`
	// WallNs is the simulated wall; IdleNs the device_idle before the pass
	// (the device waiting for the host), drawn to its left.
	WallNs int64 `json:"wall_ns"`
	IdleNs int64 `json:"idle_ns"`
	// Width is the columns the timeline was cut for.
	Width int `json:"width"`
	// Keys are the Graph keys, indexed by Segment.Key; "" (index 0) is the
	// ordinary tasks.
	Keys []string `json:"keys"`
	// Cores are the cores that ran something, in order, with their
	// segments.
	Cores []TimelineCore `json:"cores"`
	// Slices is the slices before merging.
	Slices int `json:"slices"`
}

// TimelineCore is one core's row.
type TimelineCore struct {
	Name     string            `json:"name"`
	BusyNs   int64             `json:"busy_ns"`
	Segments []TimelineSegment `json:"segments"`
}

// TimelineSegment is one slice, or several narrower than a column merged.
type TimelineSegment struct {
	StartNs int64 `json:"start_ns"`
	DurNs   int64 `json:"dur_ns"`
	// BusyNs is the time the core ran within the segment (DurNs for a
	// single slice).
	BusyNs int64 `json:"busy_ns"`
	// Key indexes DeviceTimeline.Keys: the busiest key in the segment.
	Key int `json:"key"`
	// Slices is how many slices were merged; Kernel names the kernel of a
	// single slice ("" for merged ones).
	Slices int    `json:"slices"`
	Kernel string `json:"kernel,omitempty"`
}

// TimelineSlice is one subtask on one core, in simulated ns.
type TimelineSlice struct {
	Core    int
	StartNs int64
	DurNs   int64
	Key     string
	Kernel  string
}

// NewDeviceTimeline cuts slices down for width columns over wallNs.
// coreName names core i. It is a pure function of its input.
func NewDeviceTimeline(slices_ []TimelineSlice, wallNs int64, width int, coreName func(int) string) *DeviceTimeline {
	t := &DeviceTimeline{WallNs: wallNs, Width: width, Keys: []string{""}, Slices: len(slices_)}
	if width <= 0 {
		width = 1
	}
	col := max(wallNs/int64(width), 1)
	keyIdx := map[string]int{"": 0}
	byCore := map[int][]TimelineSlice{}
	for _, s := range slices_ {
		byCore[s.Core] = append(byCore[s.Core], s)
		if _, ok := keyIdx[s.Key]; !ok {
			keyIdx[s.Key] = len(t.Keys)
			t.Keys = append(t.Keys, s.Key)
		}
	}
	cores := make([]int, 0, len(byCore))
	for c := range byCore {
		cores = append(cores, c)
	}
	slices.Sort(cores)
	for _, c := range cores {
		ss := byCore[c]
		slices.SortFunc(ss, func(a, b TimelineSlice) int { return cmp.Compare(a.StartNs, b.StartNs) })
		row := TimelineCore{Name: coreName(c)}
		// A pending merge of narrow slices, and each key's busy time in it.
		var m *TimelineSegment
		busy := map[int]int64{}
		flush := func() {
			if m == nil {
				return
			}
			best, bestNs := 0, int64(-1)
			for k, ns := range busy {
				if ns > bestNs || ns == bestNs && k < best {
					best, bestNs = k, ns
				}
			}
			m.Key = best
			row.Segments = append(row.Segments, *m)
			m = nil
			clear(busy)
		}
		for _, s := range ss {
			row.BusyNs += s.DurNs
			k := keyIdx[s.Key]
			if s.DurNs >= col {
				flush()
				row.Segments = append(row.Segments, TimelineSegment{StartNs: s.StartNs, DurNs: s.DurNs, BusyNs: s.DurNs, Key: k, Slices: 1, Kernel: s.Kernel})
				continue
			}
			if m != nil && s.StartNs+s.DurNs > m.StartNs+col {
				flush()
			}
			if m == nil {
				// A lone narrow slice keeps its kernel's name.
				m = &TimelineSegment{StartNs: s.StartNs, Kernel: s.Kernel}
			} else {
				m.Kernel = ""
			}
			m.DurNs = max(m.DurNs, s.StartNs+s.DurNs-m.StartNs)
			m.BusyNs += s.DurNs
			m.Slices++
			busy[k] += s.DurNs
		}
		flush()
		t.Cores = append(t.Cores, row)
	}
	return t
}

// Check says what a timeline read back from a report holds that the page
// cannot draw: a segment whose key is not in Keys, negative times, no
// width. NewDeviceTimeline makes none of these; a file edited by hand or
// by another program can.
func (t *DeviceTimeline) Check() error {
	if t.Width < 0 || t.WallNs < 0 || t.IdleNs < 0 || t.Slices < 0 {
		return fmt.Errorf("timeline: width %d, wall_ns %d, idle_ns %d, slices %d: want none negative", t.Width, t.WallNs, t.IdleNs, t.Slices)
	}
	if len(t.Keys) == 0 {
		return fmt.Errorf("timeline: no keys: want at least \"\" (the ordinary tasks) at 0")
	}
	for i, c := range t.Cores {
		for j, s := range c.Segments {
			if s.Key < 0 || s.Key >= len(t.Keys) {
				return fmt.Errorf("timeline: cores[%d] (%q) segments[%d]: key %d: want 0..%d (an index of keys)", i, c.Name, j, s.Key, len(t.Keys)-1)
			}
			if s.StartNs < 0 || s.DurNs < 0 || s.BusyNs < 0 || s.Slices < 0 {
				return fmt.Errorf("timeline: cores[%d] (%q) segments[%d]: start_ns %d, dur_ns %d, busy_ns %d, slices %d: want none negative", i, c.Name, j, s.StartNs, s.DurNs, s.BusyNs, s.Slices)
			}
		}
	}
	return nil
}
