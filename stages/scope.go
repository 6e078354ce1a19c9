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
