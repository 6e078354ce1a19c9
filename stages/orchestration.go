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
	// At, when set, is the orchestration of one round, for a program whose
	// steps change round to round (a decode server's: contexts grow,
	// requests end and start, the batch moves): round r runs At(r), whose
	// Name is this one's (its Graphs are the same program's, their keys
	// telling the rounds' bodies apart) and whose Step names that round's
	// program. Nil: every round runs Run.
	At func(round int) *Orchestration
	// Step names the round's program when At made this orchestration (""
	// when every round runs one program): two rounds of one Step run the
	// same work, so the golden check's reference is made per Name and Step.
	Step string
}

// Round is the orchestration round runs: At's, or o itself.
func (o *Orchestration) Round(round int) *Orchestration {
	if o.At == nil {
		return o
	}
	return o.At(round)
}
