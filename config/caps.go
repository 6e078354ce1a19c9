package config

import "github.com/hbg-dev/hbg/stages"

// caps is what a Submitter can do beyond stages.Submitter: the optional
// interfaces the interpreter uses, asked once, when it takes the Submitter
// (a run, a Graph body), in this one place, rather than sniffed at each
// use. A new capability is a field here and a line in subOf.
type caps struct {
	reader   TensorReader          // told of every host read
	roots    stages.RootCounter    // numbers a task's outputs before Submit returns
	user     graphUser             // told of every call of a form's Graph block (Validate)
	locs     stages.LocWriter      // takes a Graph call's boundary by template
	bounds   stages.BoundaryWriter // lends the slots a Graph call's boundary is written into
	observer CallObserver          // told of every block call and its end
	waiter   stages.HostWaiter     // orders the host's data accesses with the tasks
	writer   TensorWriter          // told of every host write
}

// sub is a Submitter with its caps, as the runner's walks pass it.
type sub struct {
	stages.Submitter
	caps
}

func subOf(o stages.Submitter) *sub {
	s := &sub{Submitter: o}
	s.reader, _ = o.(TensorReader)
	s.roots, _ = o.(stages.RootCounter)
	s.user, _ = o.(graphUser)
	s.locs, _ = o.(stages.LocWriter)
	s.bounds, _ = o.(stages.BoundaryWriter)
	s.observer, _ = o.(CallObserver)
	s.waiter, _ = o.(stages.HostWaiter)
	s.writer, _ = o.(TensorWriter)
	return s
}
