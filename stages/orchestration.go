package stages

// Orchestration is a program of tasks: a Go function, or a model config
// interpreted as one (config.Model.Orchestration). Name is its identity,
// hashed into every full_key: two orchestrations that may record different
// bodies under one graph key must have different names.
type Orchestration struct {
	Name    string
	Entry   []Root   // RootID i is Entry[i]
	Kernels []Kernel // KernelID i is Kernels[i]
	Run     func(o Submitter) error
	// File is the model file the orchestration interprets, if any: a
	// race names the file:line of the op that made each task.
	File string
	// MaxEdges bounds the dependency edges of the pass's run image and of
	// each Definition it records (0: DefaultMaxEdges): the model's
	// max_edges, or a command's or a node's bound.
	MaxEdges int64
}
