package stages

// scopeStack is the open scopes of a submission sequence (the run's, or a
// recording's own): inside any manual scope, tasks get explicit dependencies
// only and register nothing.
type scopeStack struct {
	modes  []ScopeMode
	manual int // manual scopes open
}

func (s *scopeStack) begin(mode ScopeMode) {
	s.modes = append(s.modes, mode)
	if mode == ScopeManual {
		s.manual++
	}
}

// end closes the innermost scope; it reports false when none is open.
func (s *scopeStack) end() bool {
	n := len(s.modes)
	if n == 0 {
		return false
	}
	if s.modes[n-1] == ScopeManual {
		s.manual--
	}
	s.modes = s.modes[:n-1]
	return true
}

func (s *scopeStack) inManual() bool { return s.manual > 0 }
func (s *scopeStack) depth() int     { return len(s.modes) }
func (s *scopeStack) reset()         { s.modes, s.manual = s.modes[:0], 0 }

// Scopes is a set-aside scope stack (OrdinaryPath.SuspendScopes).
type Scopes struct{ s scopeStack }

// SuspendScopes sets the open scopes aside and starts an empty stack: a
// Graph body inlined by the golden reference runs with its own scopes, as
// it does when it records, whatever scope its call sits in. ResumeScopes
// puts them back.
func (o *OrdinaryPath) SuspendScopes() Scopes {
	saved := Scopes{o.scopes}
	o.scopes = scopeStack{}
	return saved
}

// ResumeScopes restores scopes set aside by SuspendScopes.
func (o *OrdinaryPath) ResumeScopes(s Scopes) { o.scopes = s.s }
