// Package hbg is the host side of a Graph-recording task runtime for the
// a2a3 NPU: an actor system that records a block of orchestration once as a
// Definition and replays it, with a simulated device. This package holds no
// code; it is where the house is written down. README.md says how to run
// it, docs/design.md how it works, and each package's doc what it owns.
//
// # The layering
//
// The packages stand in eight layers. A package imports only packages of
// the layers below its own, never one of its own layer or above: there is
// no arrow back up and no circle (tests/house_test.go holds every package
// to it, and a new package must be given its layer there).
//
//  1. The leaves import nothing of the module: stages/imagefmt (the two
//     images' bytes), authn (a node's credentials), authn/pki (the
//     certificates they are made of: the local PKI on loopback and the
//     tests' authorities), peer/defsig (a peer's Definition signatures),
//     config/models (the shipped model files), internal/reftrace,
//     internal/benchunit, and this package.
//  2. The core: stages, the data model and its pure steps, the pass and
//     the store as state machines, and both image codecs (why one package:
//     its doc); and beside it, over authn/pki alone, internal/etcdtest (a
//     real etcd for the cluster tests).
//  3. What stands on the core alone: npu (the device, pure), config (the
//     model language and its interpreter), diskstore (the Definition store
//     on disk), internal/refwriter; and trace (telemetry), which imports
//     nothing of the module but is a shell's service, not a leaf of the
//     core.
//  4. What combines them: golden (the golden check, pure, over npu),
//     analyze (the structural map of a model, pure, over config), mailbox
//     (the messages between actors), report (over trace),
//     internal/storetest (over diskstore).
//  5. actors: the runtime, thin shells around the pure steps.
//  6. Over the runtime, one process's way out: peer (a Definition recorded
//     once per cluster) and wire (the messages between processes).
//  7. remote: ranks on other processes, over peer and wire.
//  8. The commands and the tests: cmd/hbgrun, tools/..., tests.
//
// Purity is a second rule across the layers: stages, npu, golden and
// analyze are pure stages (no actors, telemetry, clock, locks or
// goroutines, over their whole import closure: tests/purity_test.go).
//
// Sizes are a third: no file over 800 lines (a generated one aside) and no
// function over 150 (tests/house_test.go, with its allowlist of known
// breaches, which may only shrink).
package hbg
