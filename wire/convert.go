// Package wire is what hbg sends between processes: the protobuf messages
// of wire.proto (a driver places ranks on nodes, asks for passes and gets
// their results over protoactor remote) and plain functions between them
// and the runtime's structs (actors.PassResult, trace.Pass, npu.Result,
// golden.Check).
//
// A message from another process is input, not an invariant: every
// decoder here validates what it reads and returns an error (wrapping
// ErrBadMessage) for anything out of range, never panics on it.
package wire

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/golden"
	"github.com/hbg-dev/hbg/npu"
	"github.com/hbg-dev/hbg/stages"
	"github.com/hbg-dev/hbg/trace"
)

// ErrBadMessage marks a message that could not be decoded or failed
// validation.
var ErrBadMessage = errors.New("bad wire message")

// ErrLimit marks a request a node refused because it is over one of the
// node's limits (hbgrun node's --max-* flags); each limit has its own
// sentinel, which wraps it.
var ErrLimit = errors.New("over a node's limit")

// The limits a node enforces, one sentinel each.
var (
	ErrTooManyRanks      = fmt.Errorf("%w of ranks per placement", ErrLimit)
	ErrTooManyPlacements = fmt.Errorf("%w of placements", ErrLimit)
	ErrTooManyDrivers    = fmt.Errorf("%w of concurrent drivers", ErrLimit)
	ErrModelTooLarge     = fmt.Errorf("%w of model bytes", ErrLimit)
	ErrTooManyTasks      = fmt.Errorf("%w of device tasks per pass", ErrLimit)
	ErrTooManyEdges      = fmt.Errorf("%w of dependency edges per pass", ErrLimit)
)

// ErrUnauthorized marks a message refused because the connection it came
// over may not send it (not the placing driver, not the claim holder, not
// the node asked, or an address the connection does not vouch for).
var ErrUnauthorized = errors.New("unauthorized")

// limitKinds pairs each limit's sentinel with its kind on the wire.
var limitKinds = []struct {
	err  error
	kind Failure_Kind
}{
	{ErrTooManyRanks, Failure_LIMIT_RANKS},
	{ErrTooManyPlacements, Failure_LIMIT_PLACEMENTS},
	{ErrTooManyDrivers, Failure_LIMIT_DRIVERS},
	{ErrModelTooLarge, Failure_LIMIT_MODEL},
	{ErrTooManyTasks, Failure_LIMIT_TASKS},
	{ErrTooManyEdges, Failure_LIMIT_EDGES},
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadMessage}, args...)...)
}

// ModelHash is the content hash a Place carries for its model.
func ModelHash(yaml []byte) []byte {
	s := sha256.Sum256(yaml)
	return s[:]
}

// TokenSize is a placement's token's length (Place.token): 128 random bits.
const TokenSize = 16

// Bounds on what a Place may ask for: a message is refused before a
// runtime is sized from it.
const (
	maxRanks     = 1 << 16
	maxNodes     = 1 << 12
	maxRecorders = 1 << 12
	maxInFlight  = 1 << 12
)

// Validate checks a placement before anything is built from it: the model
// hashes to its hash, and every count is in range.
func (p *Place) Validate() error {
	switch {
	case p == nil:
		return bad("place: empty")
	case p.GetRun() == "":
		return bad("place: no run id")
	case len(p.GetModelYaml()) == 0:
		return bad("place: run %s: no model", p.GetRun())
	case len(p.GetModelSha256()) != sha256.Size:
		return bad("place: run %s: model hash of %d bytes, want %d", p.GetRun(), len(p.GetModelSha256()), sha256.Size)
	case string(ModelHash(p.GetModelYaml())) != string(p.GetModelSha256()):
		return bad("place: run %s: model %s: its %d bytes do not hash to the hash sent (%x)", p.GetRun(), p.GetModelName(), len(p.GetModelYaml()), p.GetModelSha256()[:8])
	case p.GetForm() == "":
		return bad("place: run %s: no form", p.GetRun())
	case len(p.GetRanks()) == 0 || len(p.GetRanks()) > maxRanks:
		return bad("place: run %s: %d ranks, want 1 to %d", p.GetRun(), len(p.GetRanks()), maxRanks)
	case len(p.GetNodes()) == 0 || len(p.GetNodes()) > maxNodes:
		return bad("place: run %s: %d nodes, want 1 to %d", p.GetRun(), len(p.GetNodes()), maxNodes)
	case p.GetNode() < 0 || int(p.GetNode()) >= len(p.GetNodes()):
		return bad("place: run %s: node index %d of %d nodes", p.GetRun(), p.GetNode(), len(p.GetNodes()))
	case p.GetDriverAddress() == "" || p.GetDriverId() == "":
		return bad("place: run %s: no driver to answer", p.GetRun())
	case len(p.GetToken()) != TokenSize:
		return bad("place: run %s: token of %d bytes, want %d", p.GetRun(), len(p.GetToken()), TokenSize)
	}
	seen := map[int32]bool{}
	for _, r := range p.GetRanks() {
		if r < 0 || seen[r] {
			return bad("place: run %s: rank %d (negative or twice)", p.GetRun(), r)
		}
		seen[r] = true
	}
	o := p.GetOptions()
	switch {
	case o == nil:
		return bad("place: run %s: no options", p.GetRun())
	case o.GetRecorders() < 1 || o.GetRecorders() > maxRecorders:
		return bad("place: run %s: %d recorders, want 1 to %d", p.GetRun(), o.GetRecorders(), maxRecorders)
	case o.GetInFlight() < 1 || o.GetInFlight() > maxInFlight:
		return bad("place: run %s: %d passes in flight, want 1 to %d", p.GetRun(), o.GetInFlight(), maxInFlight)
	case o.GetPassTimeoutNs() < 0:
		return bad("place: run %s: pass timeout %d ns", p.GetRun(), o.GetPassTimeoutNs())
	case o.GetKeepBytes() < 0 || o.GetKeepDefinitions() < 0:
		return bad("place: run %s: residency budget %d bytes, %d Definitions (want 0 or more)", p.GetRun(), o.GetKeepBytes(), o.GetKeepDefinitions())
	}
	return nil
}

// Validate checks a pass request.
func (r *PassRequest) Validate() error {
	switch {
	case r == nil:
		return bad("pass request: empty")
	case r.GetRank() < 0 || r.GetRound() < 0:
		return bad("pass request: run %s: rank %d round %d", r.GetRun(), r.GetRank(), r.GetRound())
	}
	return nil
}

// FailureOf is err as a Failure: its kind is the sentinel errors.Is finds
// in it (nil for a nil err).
func FailureOf(err error) *Failure {
	if err == nil {
		return nil
	}
	k := Failure_OTHER
	switch {
	case errors.Is(err, actors.ErrStopped):
		k = Failure_STOPPED
	case errors.Is(err, context.Canceled):
		k = Failure_CANCELED
	case errors.Is(err, context.DeadlineExceeded):
		k = Failure_DEADLINE
	case errors.Is(err, actors.ErrRankBusy):
		k = Failure_RANK_BUSY
	case errors.Is(err, actors.ErrInvalidPass):
		k = Failure_INVALID_PASS
	case errors.Is(err, ErrBadMessage):
		k = Failure_BAD_MESSAGE
	case errors.Is(err, ErrUnauthorized):
		k = Failure_UNAUTHORIZED
	}
	for _, l := range limitKinds {
		if errors.Is(err, l.err) {
			k = l.kind
		}
	}
	return &Failure{Kind: k, Text: err.Error()}
}

// Err is the failure as an error (nil for a nil Failure): errors.Is finds
// the sentinel of its kind in it.
func (f *Failure) Err() error {
	if f == nil {
		return nil
	}
	return &RemoteError{Kind: f.GetKind(), Text: f.GetText()}
}

// RemoteError is an error that happened in another process, as it crossed
// the wire: the text it had there and its kind.
type RemoteError struct {
	Kind Failure_Kind
	Text string
}

func (e *RemoteError) Error() string { return e.Text }

// Is matches the sentinel of the error's kind: actors.ErrStopped,
// context.Canceled, context.DeadlineExceeded, actors.ErrRankBusy,
// actors.ErrInvalidPass, ErrBadMessage, ErrUnauthorized, or a limit's
// sentinel and ErrLimit.
func (e *RemoteError) Is(target error) bool {
	for _, l := range limitKinds {
		if e.Kind == l.kind {
			return target == l.err || target == ErrLimit
		}
	}
	switch e.Kind {
	case Failure_UNAUTHORIZED:
		return target == ErrUnauthorized
	case Failure_STOPPED:
		return target == actors.ErrStopped
	case Failure_CANCELED:
		return target == context.Canceled
	case Failure_DEADLINE:
		return target == context.DeadlineExceeded
	case Failure_RANK_BUSY:
		return target == actors.ErrRankBusy
	case Failure_INVALID_PASS:
		return target == actors.ErrInvalidPass
	case Failure_BAD_MESSAGE:
		return target == ErrBadMessage
	}
	return false
}

// FromResult encodes a pass's result. Run, Seq and Node are the caller's
// to fill.
func FromResult(res *actors.PassResult) *PassResult {
	m := &PassResult{
		Rank: int32(res.Pass.Rank), Round: int32(res.Pass.Round),
		Pass: fromPass(&res.Pass), Counts: fromCounts(&res.Counts),
		Warnings: res.Warnings, Failure: FailureOf(res.Err),
		DeviceStartNs: res.DeviceStartNs,
	}
	if d := res.Device; d != nil {
		m.Device = fromDevice(d)
	}
	if g := res.Golden; g != nil {
		m.Golden = fromGolden(g)
	}
	return m
}

// ToResult decodes a pass's result; a field out of range is an error
// wrapping ErrBadMessage. The pass's failure, if any, is res.Err.
func (m *PassResult) ToResult() (*actors.PassResult, error) {
	if m == nil {
		return nil, bad("pass result: empty")
	}
	if m.GetRank() < 0 || m.GetRound() < 0 {
		return nil, bad("pass result: rank %d round %d", m.GetRank(), m.GetRound())
	}
	where := fmt.Sprintf("pass result of rank %d round %d", m.GetRank(), m.GetRound())
	res := &actors.PassResult{Warnings: m.GetWarnings(), DeviceStartNs: m.GetDeviceStartNs()}
	if f := m.GetFailure(); f != nil {
		res.Err = f.Err()
	}
	p, err := toPass(m.GetPass(), int(m.GetRank()), int(m.GetRound()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	res.Pass = p
	if res.Counts, err = toCounts(m.GetCounts()); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if d := m.GetDevice(); d != nil {
		if res.Device, err = toDevice(d); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if g := m.GetGolden(); g != nil {
		if res.Golden, err = toGolden(g); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if res.Device != nil {
			// The races travel once, with the golden check.
			res.Device.Races = res.Golden.Races
		}
	}
	return res, nil
}

func fromPass(p *trace.Pass) *Pass {
	m := &Pass{
		Cold: p.Cold, PhasesNs: p.Phases[:], Measured: uint32(p.Measured),
		Ops:           make([]*OpTotal, trace.NumOps),
		RecordedNodes: int64(p.RecordedNodes), BuiltDefinitions: int64(p.BuiltDefinitions),
		UploadedDefinitionBytes: p.UploadedDefinitionBytes,
		LoadedDefinitions:       int64(p.LoadedDefinitions), LoadedBytes: p.LoadedBytes,
		StoreRejected: int64(p.StoreRejected), SimulationNs: p.SimulationNs, DeviceIdleNs: p.DeviceIdleNs,
		FetchedDefinitions: int64(p.FetchedDefinitions), FetchedBytes: p.FetchedBytes, FetchRejected: int64(p.FetchRejected),
		RunImageBytes: p.RunImageBytes, RunImageSentBytes: p.RunImageSentBytes,
		RecordWaitNs: p.RecordWaitNs, DeviceDefinitionBytes: p.DeviceDefinitionBytes,
	}
	for i, o := range p.Ops {
		m.Ops[i] = &OpTotal{Count: o.Count, TotalNs: o.TotalNs}
	}
	return m
}

func toPass(m *Pass, rank, round int) (trace.Pass, error) {
	p := trace.Pass{Rank: rank, Round: round}
	if m == nil {
		return p, bad("no pass")
	}
	// A pass that failed early measured nothing and may send no arrays.
	if n := len(m.GetPhasesNs()); n != 0 && n != int(trace.NumPhases) {
		return p, bad("%d phases, want %d", n, trace.NumPhases)
	}
	if n := len(m.GetOps()); n != 0 && n != int(trace.NumOps) {
		return p, bad("%d operations, want %d", n, trace.NumOps)
	}
	if m.GetMeasured() >= 1<<trace.NumPhases || (m.GetMeasured() != 0 && len(m.GetPhasesNs()) == 0) {
		return p, bad("measured phases %#x", m.GetMeasured())
	}
	p.Cold = m.GetCold()
	copy(p.Phases[:], m.GetPhasesNs())
	p.Measured = trace.PhaseSet(m.GetMeasured())
	for i, o := range m.GetOps() {
		if o == nil {
			return p, bad("operation %d empty", i)
		}
		p.Ops[i] = trace.OpTotal{Count: o.GetCount(), TotalNs: o.GetTotalNs()}
	}
	for _, v := range []int64{m.GetRecordedNodes(), m.GetBuiltDefinitions(), m.GetUploadedDefinitionBytes(), m.GetLoadedDefinitions(), m.GetLoadedBytes(), m.GetStoreRejected(),
		m.GetFetchedDefinitions(), m.GetFetchedBytes(), m.GetFetchRejected(), m.GetRunImageBytes(), m.GetRunImageSentBytes(),
		m.GetRecordWaitNs(), m.GetDeviceDefinitionBytes()} {
		if v < 0 {
			return p, bad("negative count %d", v)
		}
	}
	p.RecordedNodes, p.BuiltDefinitions = int(m.GetRecordedNodes()), int(m.GetBuiltDefinitions())
	p.UploadedDefinitionBytes = m.GetUploadedDefinitionBytes()
	p.LoadedDefinitions, p.LoadedBytes = int(m.GetLoadedDefinitions()), m.GetLoadedBytes()
	p.StoreRejected = int(m.GetStoreRejected())
	p.FetchedDefinitions, p.FetchedBytes = int(m.GetFetchedDefinitions()), m.GetFetchedBytes()
	p.FetchRejected = int(m.GetFetchRejected())
	p.SimulationNs, p.DeviceIdleNs = m.GetSimulationNs(), m.GetDeviceIdleNs()
	p.RunImageBytes, p.RunImageSentBytes = m.GetRunImageBytes(), m.GetRunImageSentBytes()
	p.RecordWaitNs, p.DeviceDefinitionBytes = m.GetRecordWaitNs(), m.GetDeviceDefinitionBytes()
	return p, nil
}

func fromCounts(c *actors.Counts) *Counts {
	return &Counts{
		GraphCalls: int64(c.GraphCalls), HostSubmissions: int64(c.HostSubmissions),
		OrdinaryTasks: int64(c.OrdinaryTasks), GraphSubmissions: int64(c.GraphSubmissions),
		Definitions: int64(c.Definitions), Demoted: int64(c.Demoted),
		BoundaryMismatches: int64(c.BoundaryMismatches), FallbackCalls: int64(c.FallbackCalls),
		Verified: int64(c.Verified), ExpectedDeviceTasks: int64(c.ExpectedDeviceTasks),
		Shells: int64(c.Shells), Evicted: int64(c.Evicted), Kept: int64(c.Kept), KeptBytes: c.KeptBytes,
		OrdinaryWhileRecording: int64(c.OrdinaryWhileRecording), KeysMet: int64(c.KeysMet), Rerecorded: int64(c.Rerecorded),
		Barriers: int64(c.Barriers),
	}
}

func toCounts(m *Counts) (actors.Counts, error) {
	if m == nil {
		return actors.Counts{}, nil
	}
	vs := []int64{m.GetGraphCalls(), m.GetHostSubmissions(), m.GetOrdinaryTasks(), m.GetGraphSubmissions(), m.GetDefinitions(),
		m.GetDemoted(), m.GetBoundaryMismatches(), m.GetFallbackCalls(), m.GetVerified(), m.GetExpectedDeviceTasks(),
		m.GetShells(), m.GetEvicted(), m.GetKept(), m.GetOrdinaryWhileRecording(), m.GetKeysMet(), m.GetRerecorded(), m.GetBarriers()}
	if m.GetKeptBytes() < 0 {
		return actors.Counts{}, bad("kept bytes %d negative", m.GetKeptBytes())
	}
	for _, v := range vs {
		if v < 0 || v > 1<<40 {
			return actors.Counts{}, bad("count %d out of range", v)
		}
	}
	return actors.Counts{
		GraphCalls: int(vs[0]), HostSubmissions: int(vs[1]), OrdinaryTasks: int(vs[2]), GraphSubmissions: int(vs[3]),
		Definitions: int(vs[4]), Demoted: int(vs[5]), BoundaryMismatches: int(vs[6]), FallbackCalls: int(vs[7]),
		Verified: int(vs[8]), ExpectedDeviceTasks: int(vs[9]),
		Shells: int(vs[10]), Evicted: int(vs[11]), Kept: int(vs[12]), KeptBytes: m.GetKeptBytes(),
		OrdinaryWhileRecording: int(vs[13]), KeysMet: int(vs[14]), Rerecorded: int(vs[15]), Barriers: int(vs[16]),
	}, nil
}

func fromDevice(d *npu.Result) *Device {
	return &Device{
		Tasks: int64(d.Tasks), Kernels: int64(d.Kernels), Skipped: int64(d.Skipped),
		Dummies: int64(d.Dummies), Allocs: int64(d.Allocs), GraphTasks: int64(d.GraphTasks), Subtasks: int64(d.Subtasks),
		SimNs: d.SimNs, Digest: d.Digest, CoreBusyNs: d.CoreBusyNs, CriticalPathNs: d.CriticalPathNs,
		RaceCount: int64(d.RaceCount), DeclaredRaces: int64(d.DeclaredRaces),
		FaninEdges: int64(d.FaninEdges), ShippedEdges: int64(d.ShippedEdges), AicpuBusyNs: d.AICPUBusyNs,
	}
}

// maxCores bounds a device's core list (a2a3: 72).
const maxCores = 1 << 12

func toDevice(m *Device) (*npu.Result, error) {
	vs := []int64{m.GetTasks(), m.GetKernels(), m.GetSkipped(), m.GetDummies(), m.GetAllocs(), m.GetGraphTasks(), m.GetSubtasks(), m.GetRaceCount(), m.GetDeclaredRaces(),
		m.GetFaninEdges(), m.GetShippedEdges()}
	for _, v := range vs {
		if v < 0 || v > 1<<40 {
			return nil, bad("device count %d out of range", v)
		}
	}
	if len(m.GetCoreBusyNs()) > maxCores || len(m.GetCoreBusyNs())%3 != 0 {
		return nil, bad("device of %d cores, want a multiple of 3 up to %d (1 AIC + 2 AIV per cluster)", len(m.GetCoreBusyNs()), maxCores)
	}
	if len(m.GetAicpuBusyNs()) > maxCores {
		return nil, bad("device of %d AICPU threads, want at most %d", len(m.GetAicpuBusyNs()), maxCores)
	}
	return &npu.Result{
		Tasks: int(vs[0]), Kernels: int(vs[1]), Skipped: int(vs[2]), Dummies: int(vs[3]), Allocs: int(vs[4]),
		GraphTasks: int(vs[5]), Subtasks: int(vs[6]), RaceCount: int(vs[7]), DeclaredRaces: int(vs[8]),
		SimNs: m.GetSimNs(), Digest: m.GetDigest(), CoreBusyNs: m.GetCoreBusyNs(), CriticalPathNs: m.GetCriticalPathNs(),
		FaninEdges: int(vs[9]), ShippedEdges: int(vs[10]), AICPUBusyNs: m.GetAicpuBusyNs(),
	}, nil
}

func fromGolden(g *golden.Check) *Golden {
	m := &Golden{
		Reference: g.Reference, Verdict: string(g.Verdict), Match: g.Match,
		Digest: g.Digest, ReferenceDigest: g.ReferenceDigest,
		Tasks: int64(g.Tasks), ReferenceTasks: int64(g.ReferenceTasks),
		Races: fromRaces(g.Races), RaceCount: int64(g.RaceCount),
		ReferenceRaces: fromRaces(g.ReferenceRaces), ReferenceRaceCount: int64(g.ReferenceRaceCount),
		DeclaredRaces: int64(g.DeclaredRaces), Diff: fromDiff(g.Diff),
		EagerDigest: g.Eager.Digest, EagerMatch: g.Eager.Match,
		EagerRaces: fromRaces(g.Eager.Races), EagerRaceCount: int64(g.Eager.RaceCount), EagerDiff: fromDiff(g.Eager.Diff),
	}
	return m
}

func toGolden(m *Golden) (*golden.Check, error) {
	v := golden.Verdict(m.GetVerdict())
	switch v {
	case golden.VerdictMatch, golden.VerdictMismatch, golden.VerdictRacy:
	default:
		return nil, bad("golden verdict %q, want match, mismatch or racy", m.GetVerdict())
	}
	for _, n := range []int64{m.GetTasks(), m.GetReferenceTasks(), m.GetRaceCount(), m.GetReferenceRaceCount(), m.GetDeclaredRaces(), m.GetEagerRaceCount()} {
		if n < 0 || n > 1<<40 {
			return nil, bad("golden count %d out of range", n)
		}
	}
	g := &golden.Check{
		Reference: m.GetReference(), Verdict: v, Match: m.GetMatch(),
		Digest: m.GetDigest(), ReferenceDigest: m.GetReferenceDigest(),
		Tasks: int(m.GetTasks()), ReferenceTasks: int(m.GetReferenceTasks()),
		RaceCount: int(m.GetRaceCount()), ReferenceRaceCount: int(m.GetReferenceRaceCount()),
		DeclaredRaces: int(m.GetDeclaredRaces()),
		Eager:         golden.EagerCheck{Digest: m.GetEagerDigest(), Match: m.GetEagerMatch(), RaceCount: int(m.GetEagerRaceCount())},
	}
	var err error
	if g.Races, err = toRaces(m.GetRaces()); err != nil {
		return nil, err
	}
	if g.ReferenceRaces, err = toRaces(m.GetReferenceRaces()); err != nil {
		return nil, err
	}
	if g.Eager.Races, err = toRaces(m.GetEagerRaces()); err != nil {
		return nil, err
	}
	if g.Diff, err = toDiff(m.GetDiff()); err != nil {
		return nil, err
	}
	if g.Eager.Diff, err = toDiff(m.GetEagerDiff()); err != nil {
		return nil, err
	}
	return g, nil
}

func fromRaces(rs []npu.Race) []*Race {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*Race, len(rs))
	for i := range rs {
		r := &rs[i]
		out[i] = &Race{
			Kind: int32(r.Kind), A: fromAccess(&r.A), B: fromAccess(&r.B),
			Root: int32(r.Root), Graph: int32(r.Graph), Internal: r.Internal, Lo: r.Lo, Hi: r.Hi,
		}
	}
	return out
}

func toRaces(ms []*Race) ([]npu.Race, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	out := make([]npu.Race, len(ms))
	for i, m := range ms {
		if m == nil {
			return nil, bad("race %d empty", i)
		}
		k := npu.RaceKind(m.GetKind())
		if k != npu.RaceWriteWrite && k != npu.RaceReadWrite {
			return nil, bad("race %d: kind %d", i, m.GetKind())
		}
		a, err := toAccess(m.GetA())
		if err != nil {
			return nil, bad("race %d: %v", i, err)
		}
		b, err := toAccess(m.GetB())
		if err != nil {
			return nil, bad("race %d: %v", i, err)
		}
		if m.GetLo() > m.GetHi() {
			return nil, bad("race %d: interval [%d, %d)", i, m.GetLo(), m.GetHi())
		}
		out[i] = npu.Race{Kind: k, A: a, B: b, Root: stages.RootID(m.GetRoot()), Graph: stages.TaskID(m.GetGraph()),
			Internal: m.GetInternal(), Lo: m.GetLo(), Hi: m.GetHi()}
	}
	return out, nil
}

func fromAccess(a *npu.RaceAccess) *RaceAccess {
	return &RaceAccess{Task: fromTaskInfo(&a.TaskInfo), Arg: a.Arg, Tag: int32(a.Tag)}
}

func toAccess(m *RaceAccess) (npu.RaceAccess, error) {
	if m == nil {
		return npu.RaceAccess{}, bad("access empty")
	}
	ti, err := toTaskInfo(m.GetTask())
	if err != nil {
		return npu.RaceAccess{}, err
	}
	if m.GetTag() < int32(stages.TagInvalid) || m.GetTag() > int32(stages.TagNoDep) {
		return npu.RaceAccess{}, bad("tag %d", m.GetTag())
	}
	return npu.RaceAccess{TaskInfo: ti, Arg: m.GetArg(), Tag: stages.Tag(m.GetTag())}, nil
}

func fromTaskInfo(t *npu.TaskInfo) *TaskInfo {
	return &TaskInfo{Task: int32(t.Task.Task), Node: t.Task.Node, Key: t.Key, Kind: int32(t.Kind),
		Kernel: []int32{int32(t.Kernel[0]), int32(t.Kernel[1]), int32(t.Kernel[2])}, KernelName: t.KernelName, Op: t.Op}
}

func toTaskInfo(m *TaskInfo) (npu.TaskInfo, error) {
	if m == nil {
		return npu.TaskInfo{}, bad("task empty")
	}
	if m.GetKind() < int32(stages.KindInvalid) || m.GetKind() > int32(stages.KindGraph) {
		return npu.TaskInfo{}, bad("task %d: core type %d", m.GetTask(), m.GetKind())
	}
	if len(m.GetKernel()) != 3 {
		return npu.TaskInfo{}, bad("task %d: %d kernels, want 3", m.GetTask(), len(m.GetKernel()))
	}
	k := m.GetKernel()
	return npu.TaskInfo{
		Task: npu.TaskRef{Task: stages.TaskID(m.GetTask()), Node: m.GetNode()}, Key: m.GetKey(),
		Kind: stages.Kind(m.GetKind()), Kernel: [3]stages.KernelID{stages.KernelID(k[0]), stages.KernelID(k[1]), stages.KernelID(k[2])},
		KernelName: m.GetKernelName(), Op: m.GetOp(),
	}, nil
}

func fromDiff(d *golden.Diff) *Diff {
	if d == nil {
		return nil
	}
	return &Diff{Root: int32(d.Root), Name: d.Name, Lo: d.Lo, Hi: d.Hi,
		Writer: fromTaskInfo(&d.Writer), Theirs: fromTaskInfo(&d.Theirs), Against: d.Against}
}

func toDiff(m *Diff) (*golden.Diff, error) {
	if m == nil {
		return nil, nil
	}
	w, err := toTaskInfo(m.GetWriter())
	if err != nil {
		return nil, bad("diff writer: %v", err)
	}
	t, err := toTaskInfo(m.GetTheirs())
	if err != nil {
		return nil, bad("diff writer in the other run: %v", err)
	}
	return &golden.Diff{Root: stages.RootID(m.GetRoot()), Name: m.GetName(), Lo: m.GetLo(), Hi: m.GetHi(),
		Writer: w, Theirs: t, Against: m.GetAgainst()}, nil
}
