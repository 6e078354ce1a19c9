package stages

// StoreLoad is what the Definition store on disk did for a pass: the
// Definitions it loaded in place of recordings, and the entries it found bad
// there (each moved aside, then recorded again).
type StoreLoad struct {
	Loaded int
	Bytes  int64
	Ns     int64
	// Preloaded is how many of Loaded were loaded before the pass asked
	// (a preload): their time is the preload's, not in Ns.
	Preloaded int
	// Rejected is the bad entries found, each with why.
	Rejected []string
}

// Add sums another request's StoreLoad into s.
func (s *StoreLoad) Add(o StoreLoad) {
	s.Loaded += o.Loaded
	s.Bytes += o.Bytes
	s.Ns += o.Ns
	s.Preloaded += o.Preloaded
	s.Rejected = append(s.Rejected, o.Rejected...)
}
