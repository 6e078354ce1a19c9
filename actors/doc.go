// Package actors is hbg's runtime as an actor system: a submission actor per
// rank, a prewarmed pool of recorders that build what they record, a
// Definition store that outlives runs, an uploader, a replay and a device
// actor per rank, all under one supervisor. The actors are thin: each owns
// state and calls the pure steps in stages/ (the pass itself is stages.Host
// and stages.Replay, the store's decisions stages.Store) and npu/; the
// message types are in package mailbox.
//
// # Embedding
//
// Start gives a Runtime inside an existing protoactor ActorSystem; its Pass
// runs one step of an Orchestration (a Go function over stages.Submitter; a
// YAML model is one, config.Model.Orchestration) on one rank and returns a
// Result; Stop ends it. A zero Config field takes its default
// (Config.EnsureDefaults) and Start refuses a config Config.Validate does
// not pass (*ConfigError, errors.Is ErrInvalidConfig). Pass honours its
// ctx: an ended context runs nothing, one that ends mid-pass returns
// errors.Is(err, ctx.Err()) at once and frees the rank. A rank keeps up to
// Config.InFlight passes between handoff and answer; further callers queue,
// first come first served, up to Config.QueueDepth (then *RankBusyError,
// ErrRankBusy). A nil orchestration, a negative rank or round is
// ErrInvalidPass; Pass after Stop, and every pass Stop finds in flight or
// queued, is ErrStopped. With Config.StoreDir, Runtime.Preload loads what an
// earlier process kept before the first pass. A body reaches tensors only
// through its boundary and the roots it allocates, and passes boundary
// scalars straight through (a value computed from one is baked in, and
// detected). example_test.go is a complete program; docs/embedding.md walks
// through it, with a model file checked as the CLI checks it.
//
// # Messages: who sends what to whom
//
// The logic of a pass is a pure state machine (stages.Host for host_orch,
// stages.Replay after the handoff: stages/pass.go, host.go, replay.go;
// events in, actions out, scripted in stages/testdata/pass/), and so is the
// Definition store's (stages.Store in stages/store.go: who records a key,
// who waits on whom, when a load or a fetch answers, what goes back to the
// queue; scripted in stages/testdata/store/). The actors only carry their
// inputs and outputs. The device actor speaks one protocol
// (mailbox/device.go), the one its tests drive. Messages flow one way, down
// the pipeline, at the grain of a Graph call, a recording, an upload or a
// run, never per task:
//
//	caller ──Pass──► submission-R ──handoff (run image, shells, keys awaited)──► replay-R
//	   ▲              │  ▲                                                         │  ▲
//	   │              │  └──────── passDone (slot free) / learned (keys, once) ────┤  │
//	   │              │ RecordJob (new key, or a verification)          copy+launch│  │ 2 answers
//	   │              ▼                                                            ▼  │
//	   │            store ──job──► recorder-i ──Built (records, images)──► store  device-R
//	   │              │                                                            ▲
//	   │              └──DefinitionReady──► uploader-R ──upload──► device-R ──answer──► uploader-R
//	   │                                        └──DefinitionUploaded──► replay-R
//	   └──────────────────────── result (a channel, not a mailbox) ──── replay-R
//
// Per warm pass, whatever the model, 7 messages: Pass and passDone to the
// submission, handoff and the device's two answers to the replay, the copy
// and the launch to the device (5 with Config.SkipDevice). Asserted through
// the mailbox counters for a 1-call model and for DSv4 full
// (TestWarmPassMessages, TestWarmPassMessagesDSv4).
//
// Per new key, on top, 7 messages: RecordJob to the store, the job to a
// recorder, Built to the store (the recorder records and images the
// Definition, and is free again), DefinitionReady to the rank's uploader,
// the upload and its answer, DefinitionUploaded to the replay; then one
// learned per pass (not per key) back to the submission, so that its next
// pass replays the key (TestNewKeyMessages). The submission hears of a
// Graph call only in the call itself; the replay hears once per key it
// waits for; the store hears a key twice, to dispatch its recording and to
// publish what the recorder built. While a key records, the rank starts no
// further pass, so only one pass of a rank ever waits for recordings.
//
// # Failure, case by case
//
// What happens; where it is caught; the result.
//
//   - A call's boundary breaks the contract (shape, strides, dtype, tag,
//     root size, alias partition, number of external dependencies): the
//     submission, in O(width); a warning, counted in boundary_mismatches,
//     and that call runs on the ordinary path.
//   - A body records something a Definition cannot hold (a nested Graph, a
//     tensor neither in the boundary nor allocated in the body, a dependency
//     on a caller's task the call did not pass in ExtDeps): the recorder; a
//     warning, and the pass is rerun with that key on the ordinary path (its
//     shells cannot be unwound); Config.StrictRecording makes it an error.
//   - A body returns an error while recording: the recorder; the pass fails
//     naming the key, errors.Is reaches the body's error; no restart.
//   - A body panics, or calls runtime.Goexit, while recording: the
//     recorder; the pass fails naming the key and the cause
//     (ErrBodyPanicked, ErrBodyExited); the supervisor restarts the recorder
//     (always, no budget), whose queued jobs survive.
//   - A pass's context ends, or Stop is called: Runtime.Pass;
//     errors.Is(err, context.Canceled, context.DeadlineExceeded or
//     ErrStopped) at once, and the rank is freed.
//   - A body writes a boundary tensor its caller tagged input: statically,
//     for a model's task that names the slot (exit 2 with file and line);
//     otherwise the recorder, naming key, node and slot.
//   - A value derived from a boundary scalar is baked into the Definition,
//     or the body's structure depends on a param outside its key: statically
//     for a model (exit 2 with file and line); for a body in Go, a second
//     recording of the key's first differing call, compared with the first.
//   - A bad image, a cycle, an unknown Definition: the device actor; refused
//     with the error (npu/testdata/check lists every refusal), and the
//     device serves the next request.
//   - A Definition loaded from the store on disk or fetched from a peer
//     passes the host's checks but the device cannot read it: the device
//     actor, at the launch that first replays it (npu.DefinitionError); the
//     store forgets it, moves its entry into quarantine/ and counts it
//     (store_rejected, Stats.DeviceRefused), every rank forgets the key, and
//     the refused pass is rerun once and records the key again, with a
//     warning (TestDeviceRefusedStoredImage,
//     stages/testdata/pass/device_refused).
//
// Nothing is uploaded from a failed recording: a recorder images only
// recordings that succeeded. A Definition that did succeed may already be on
// the device when another key's failure fails the pass; it is whole, and the
// next pass replays it.
package actors
