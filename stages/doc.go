// Package stages holds hbg's data model and its pure steps: dependency
// resolution over a TensorMap, recording, boundary matching, Definition
// build, the pass and the Definition store as state machines, and both image
// codecs. Nothing here starts a goroutine, reads the wall clock or knows
// about actors (tests/purity_test.go holds the whole import closure to it);
// actors call these functions and carry their inputs and outputs.
//
// # The files, by concern
//
//   - The data model: model.go (dtypes, views, tasks, roots), image.go (a
//     Definition and a run image as values), submitter.go (the Submitter an
//     orchestration and a body call, GraphCall), template.go, key.go,
//     scope.go, orchestration.go.
//   - Dependencies: tensormap.go, fanin.go, reduce.go (transitive reduction
//     of a run image's fanin).
//   - The two submit paths: submit.go (the ordinary path, OrdinaryPath,
//     which writes the run image as it goes), record.go (a Recorder turns a
//     body into a Definition), boundary.go (signatures and matching).
//   - The pass machine: pass.go (its values: Pass, Published, Outcome,
//     Learned), host.go (Host, host_orch until the handoff), replay.go
//     (Replay, after it), pass_idle.go, phaseclock.go; scripted in
//     testdata/pass.
//   - The store machine: store.go (Store: who records a key, who waits on
//     whom), storeload.go; scripted in testdata/store.
//   - The codecs: codec.go, codec_def_encode.go, codec_def_decode.go,
//     codec_run.go, codec_host.go (the host's cheap reads of a stored
//     image), codec_describe.go (hbgrun describe); the bytes themselves are
//     package imagefmt, below this one.
//
// # Why one package
//
// Issue 35 asked for these concerns apart, in packages whose imports run
// one way, or for the reason they are not. They stay one package for now,
// because the concerns share their values both ways and a split would
// first have to move those values down:
//
//   - The pass's values are the recorder's and the store's vocabulary: the
//     Recorder publishes a Published (pass.go) and the Store answers with
//     an Outcome (pass.go); a "pass" package above "store" and "record"
//     would need Published and Outcome moved into the data model first.
//   - The ordinary path writes codec bytes: OrdinaryPath writes each
//     replayed boundary straight in the run image's compact (tag, root,
//     offset) form (putBound, beside the RunImage type; the warm pass's speed: no
//     second walk to encode), and its RunImage carries the encoder's
//     unexported state; a "codec" package below "submit" would have to
//     export those internals.
//   - The codecs decode into the data model's types and the data model's
//     Definition carries what only the encoder computes (ContentHash, the
//     written slots codec_host.go reads back); the model and the codecs
//     would be one layer anyway.
//
// What is already apart is what had a one-way edge: the byte layout
// (stages/imagefmt, imported by the codecs and by npu/ for headers), the
// golden check (golden/) and the device (npu/). The first move, when it is
// worth it, is the pass's values into a model package; then the store
// machine, then the pass machine above it, each its own package.
package stages
