// Package analyze computes the structural map of a model's step that the
// seed document drew by hand, and proposes a form from it.
//
// A step is expanded from the model's program on the ordinary path (Expand):
// every block call, at any depth, is an occurrence, and each block is run
// once more with only its calls made Graphs, so that every occurrence's body
// is recorded into a Definition by the runtime's own recorder
// (stages.Recorder), exactly as a Graph of it would be. Occurrences of a
// block are then grouped into classes that can share one Definition
// (Map), on the seed's three checks, taken over the recordings: the same
// operation sequence, interchangeable kernels (by the kernel table's code
// identity, and the literals a kernel folds), and the same arguments
// position by position (tag, source — boundary slot and delta, or internal
// root —, layout, scalars baked or patched). Where two classes differ, the
// positions that differ are named, and the params that tell them apart are
// the block's construction values: they go into a Graph's key. What varies
// within a class is its boundary, patched at every replay.
//
// A cost model (Costs) whose figures come from the runtime's operation
// counters of a calibration run prices each class as ordinary submissions
// and as replays, and Propose picks the Graph blocks (no block both a Graph
// and the caller of one) and program params that minimise the predicted
// warm control plane, with each Definition's recording amortised over a
// number of passes. Form renders the proposal as YAML a model's forms:
// section accepts.
//
// The package is pure (tests/purity_test.go): it measures nothing itself;
// cmd/hbgrun's analyze command runs the calibration and hands the figures in.
package analyze
