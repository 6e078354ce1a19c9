package trace

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Slice is one bar on a timeline: a span of the host, a recording on a
// recorder, a kernel on a simulated core. Process and Track are the two
// levels Perfetto shows (a process row holding thread rows).
//
// Clocks: slices from spans (Provider.Slices) are in ns since this process
// started (the Now timeline). Slices from the simulated device are in
// simulated ns; the caller shifts them (e.g. by the device_wall span's
// start) to place them under the host's timeline, in their own process, so
// nobody mistakes simulated time for host time.
type Slice struct {
	// Process is the process row, e.g. "host" or "rank 0 device (simulated)".
	Process string
	// Track is the thread row inside it, e.g. "rank 0", "recorder-2",
	// "aic 5". Tracks are ordered by name with numbers compared as numbers
	// ("aic 2" before "aic 10").
	Track   string
	Name    string
	StartNs int64
	DurNs   int64
	// Args are shown when the slice is selected; nil is fine.
	Args map[string]any
}

// Host-side process and track names of the slices made from spans.
const (
	HostProcess = "host"
	// commandTrack holds the SpanCommand root, which has no rank.
	commandTrack = "hbgrun"
)

// traceEvent is one Chrome trace event (the "JSON Object Format" of the
// Trace Event Format, which Perfetto and chrome://tracing open).
type traceEvent struct {
	Name string `json:"name"`
	Ph   string `json:"ph"`
	// Ts and Dur are in µs, the format's unit; fractions keep the ns.
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
	// ID, Cat and Bp are a flow event's (ph s and f): the arrow's id, its
	// category, and "e" to bind the arrow's head to the enclosing slice.
	ID  int    `json:"id,omitempty"`
	Cat string `json:"cat,omitempty"`
	Bp  string `json:"bp,omitempty"`
}

// Flow is an arrow between two slices: a dependency, drawn from the
// producer's end to the consumer's start. Each end names its track and a
// time inside the slice it binds to.
type Flow struct {
	From, To FlowEnd
}

// FlowEnd is one end of a Flow.
type FlowEnd struct {
	Process, Track string
	Ns             int64
}

// WriteChromeTrace writes slices as a Chrome trace-event JSON file. Each
// distinct Process becomes a pid, numbered and sorted in order of first
// appearance (put the host's slices first); each distinct (Process, Track)
// becomes a tid, sorted by name, numbers as numbers. Within a track slices
// are written by start, longer first, so an enclosing slice precedes the
// slices it contains. The output is a function of the slices alone.
func WriteChromeTrace(w io.Writer, slices []Slice) error {
	return WriteChromeTraceFlows(w, slices, nil)
}

// WriteChromeTraceFlows is WriteChromeTrace with flow arrows (category
// "fanin"), written after the slices. A flow whose end names a track with
// no slice is left out.
func WriteChromeTraceFlows(w io.Writer, slices []Slice, flows []Flow) error {
	slices = NestLanes(slices)
	procIDs := map[string]int{}
	var procs []string
	trackSet := map[trackKey]bool{}
	for i := range slices {
		s := &slices[i]
		if _, ok := procIDs[s.Process]; !ok {
			procIDs[s.Process] = len(procs) + 1
			procs = append(procs, s.Process)
		}
		trackSet[trackKey{s.Process, s.Track}] = true
	}
	tracks := make([]trackKey, 0, len(trackSet))
	for k := range trackSet {
		tracks = append(tracks, k)
	}
	sortTracks(tracks, procIDs)
	tids := make(map[trackKey]int, len(tracks))
	for i, k := range tracks {
		tids[k] = i + 1
	}

	events := make([]traceEvent, 0, 2*len(procs)+2*len(tracks)+len(slices))
	for i, p := range procs {
		pid := i + 1
		events = append(events,
			traceEvent{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": p}},
			traceEvent{Name: "process_sort_index", Ph: "M", Pid: pid, Args: map[string]any{"sort_index": pid}},
		)
	}
	for _, k := range tracks {
		pid, tid := procIDs[k.proc], tids[k]
		events = append(events,
			traceEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": k.track}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": tid}},
		)
	}
	order := make([]int, len(slices))
	for i := range order {
		order[i] = i
	}
	sortStable(order, func(a, b int) int {
		sa, sb := &slices[a], &slices[b]
		ka, kb := trackKey{sa.Process, sa.Track}, trackKey{sb.Process, sb.Track}
		if c := cmp.Compare(tids[ka], tids[kb]); c != 0 {
			return c
		}
		if c := cmp.Compare(sa.StartNs, sb.StartNs); c != 0 {
			return c
		}
		return cmp.Compare(sb.DurNs, sa.DurNs)
	})
	for _, i := range order {
		s := &slices[i]
		k := trackKey{s.Process, s.Track}
		dur := float64(s.DurNs) / 1e3
		events = append(events, traceEvent{
			Name: s.Name, Ph: "X",
			Ts: float64(s.StartNs) / 1e3, Dur: &dur,
			Pid: procIDs[k.proc], Tid: tids[k], Args: s.Args,
		})
	}

	for i, f := range flows {
		from, to := trackKey{f.From.Process, f.From.Track}, trackKey{f.To.Process, f.To.Track}
		ft, ok1 := tids[from]
		tt, ok2 := tids[to]
		if !ok1 || !ok2 {
			continue
		}
		events = append(events,
			traceEvent{Name: "fanin", Cat: "fanin", Ph: "s", ID: i + 1, Ts: float64(f.From.Ns) / 1e3, Pid: procIDs[from.proc], Tid: ft},
			traceEvent{Name: "fanin", Cat: "fanin", Ph: "f", Bp: "e", ID: i + 1, Ts: float64(f.To.Ns) / 1e3, Pid: procIDs[to.proc], Tid: tt},
		)
	}

	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	// No displayTimeUnit: ts and dur are in µs, the format's only unit (the
	// fractions carry the ns), and a display unit of "ns" was read as the
	// timestamps' unit.
	doc := struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}{events}
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("trace: encode chrome trace: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("trace: write chrome trace: %w", err)
	}
	return nil
}

// NestLanes moves every slice that overlaps a slice of its track without
// either containing the other onto a lane track beside it, "uploader-1
// lane 2", the first lane where it nests: a viewer draws a track's
// slices as a tree, so two uploads in flight at once on one actor's track
// were drawn as a child sticking out of its parent. Slices that nest, or
// do not overlap, stay on their track; a copy is returned.
func NestLanes(in []Slice) []Slice {
	out := slices.Clone(in)
	byTrack := map[trackKey][]int{}
	var keys []trackKey
	for i := range out {
		k := trackKey{out[i].Process, out[i].Track}
		if _, ok := byTrack[k]; !ok {
			keys = append(keys, k)
		}
		byTrack[k] = append(byTrack[k], i)
	}
	for _, k := range keys {
		idx := byTrack[k]
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(out[a].StartNs, out[b].StartNs), cmp.Compare(out[b].DurNs, out[a].DurNs))
		})
		// Each lane's stack of open slices: the ends of those that
		// contain the next start.
		var lanes [][]int64
		for _, i := range idx {
			s := &out[i]
			start, end := s.StartNs, s.StartNs+s.DurNs
			lane := -1
			for l := range lanes {
				st := lanes[l]
				for len(st) > 0 && st[len(st)-1] <= start {
					st = st[:len(st)-1]
				}
				lanes[l] = st
				if lane < 0 && (len(st) == 0 || st[len(st)-1] >= end) {
					lane = l
				}
			}
			if lane < 0 {
				lane = len(lanes)
				lanes = append(lanes, nil)
			}
			lanes[lane] = append(lanes[lane], end)
			if lane > 0 {
				s.Track = fmt.Sprintf("%s lane %d", k.track, lane+1)
			}
		}
	}
	return out
}

// trackKey names a thread row.
type trackKey struct{ proc, track string }

// sortTracks orders tracks by process (first appearance), then by name.
func sortTracks(tracks []trackKey, procIDs map[string]int) {
	slices.SortFunc(tracks, func(a, b trackKey) int {
		if c := cmp.Compare(procIDs[a.proc], procIDs[b.proc]); c != 0 {
			return c
		}
		return naturalCompare(a.track, b.track)
	})
}

// sortStable is slices.SortStableFunc; the name would be shadowed by
// WriteChromeTrace's parameter.
func sortStable(order []int, f func(a, b int) int) { slices.SortStableFunc(order, f) }

// naturalCompare orders strings with runs of digits compared as numbers:
// "aic 2" < "aic 10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(a[:da], 10, 64)
			nb, _ := strconv.ParseUint(b[:db], 10, 64)
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			if c := cmp.Compare(da, db); c != 0 { // "01" after "1"
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// timelineProcessor keeps ended spans as slices for --trace-out. A lock is
// fine here: spans are per phase, recording and upload, never per task.
type timelineProcessor struct {
	mu  sync.Mutex
	out []Slice
}

var _ sdktrace.SpanProcessor = (*timelineProcessor)(nil)

func (p *timelineProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *timelineProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	sl := spanSlice(s)
	p.mu.Lock()
	p.out = append(p.out, sl)
	p.mu.Unlock()
}

func (p *timelineProcessor) Shutdown(context.Context) error   { return nil }
func (p *timelineProcessor) ForceFlush(context.Context) error { return nil }

func (p *timelineProcessor) slices() []Slice {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.out)
}

// spanSlice places a span on the host timeline: a span with an actor goes on
// that actor's track, a span with a rank on the rank's track (its run and
// phases), a recording, build or upload without an actor on a track named
// after the span, anything else on the command's track.
func spanSlice(s sdktrace.ReadOnlySpan) Slice {
	sl := Slice{
		Process: HostProcess,
		Track:   commandTrack,
		Name:    s.Name(),
		StartNs: sinceEpoch(s.StartTime()),
		DurNs:   int64(s.EndTime().Sub(s.StartTime())),
	}
	attrs := s.Attributes()
	if len(attrs) > 0 {
		sl.Args = make(map[string]any, len(attrs))
	}
	actor, rank := "", ""
	for _, kv := range attrs {
		sl.Args[string(kv.Key)] = kv.Value.AsInterface()
		switch kv.Key {
		case KeyActor:
			actor = kv.Value.AsString()
		case KeyRank:
			rank = "rank " + strconv.FormatInt(kv.Value.AsInt64(), 10)
		}
	}
	switch {
	case actor != "":
		sl.Track = actor
	case rank != "":
		sl.Track = rank
	case sl.Name == SpanRecord || sl.Name == SpanBuild || sl.Name == SpanUpload || sl.Name == SpanStoreLoad:
		sl.Track = sl.Name
	}
	return sl
}

// SeparatePasses moves every pass's slices on a rank's track (its phases
// and its golden_reference wait: slices with hbg.round) onto a slot track
// of that rank, "rank 0 pass slot 1", the lowest slot free when the pass
// starts. Passes in flight at once (the host orchestrating one while the
// device runs another) then lie side by side, and a viewer never draws a
// pass as a child of the one before it; the rank's run stays on the rank's
// own track. It returns slices, changed in place.
func SeparatePasses(sl []Slice) []Slice {
	type pass struct {
		track      string
		round      int64
		start, end int64
		slot       int
	}
	byKey := map[[2]any]*pass{}
	var passes []*pass
	for i := range sl {
		s := &sl[i]
		r, ok := s.Args[string(KeyRound)].(int64)
		if s.Process != HostProcess || !ok || !isRankTrack(s.Track) {
			continue
		}
		k := [2]any{s.Track, r}
		p := byKey[k]
		if p == nil {
			p = &pass{track: s.Track, round: r, start: s.StartNs, end: s.StartNs + s.DurNs}
			byKey[k] = p
			passes = append(passes, p)
		}
		p.start = min(p.start, s.StartNs)
		p.end = max(p.end, s.StartNs+s.DurNs)
	}
	slices.SortFunc(passes, func(a, b *pass) int {
		return cmp.Or(cmp.Compare(a.track, b.track), cmp.Compare(a.start, b.start), cmp.Compare(a.round, b.round))
	})
	ends := map[string][]int64{} // per rank track, each slot's last end
	for _, p := range passes {
		e := ends[p.track]
		p.slot = len(e)
		for j, end := range e {
			if end <= p.start {
				p.slot = j
				break
			}
		}
		if p.slot == len(e) {
			e = append(e, 0)
		}
		e[p.slot] = p.end
		ends[p.track] = e
	}
	for i := range sl {
		s := &sl[i]
		r, ok := s.Args[string(KeyRound)].(int64)
		if s.Process != HostProcess || !ok || !isRankTrack(s.Track) {
			continue
		}
		s.Track = fmt.Sprintf("%s pass slot %d", s.Track, byKey[[2]any{s.Track, r}].slot)
	}
	return sl
}

// isRankTrack is a rank's host track, "rank 3" (spanSlice).
func isRankTrack(track string) bool {
	n, ok := strings.CutPrefix(track, "rank ")
	return ok && n != "" && digitRun(n) == len(n)
}
