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
	// Rejected is the bad entries found, each with why: errors.Is(err,
	// diskstore.ErrRejected) for one refused on load, ErrDeviceRefused for
	// one the device could not read.
	Rejected []error
}

// Add sums another request's StoreLoad into s.
func (s *StoreLoad) Add(o StoreLoad) {
	s.Loaded += o.Loaded
	s.Bytes += o.Bytes
	s.Ns += o.Ns
	s.Preloaded += o.Preloaded
	s.Rejected = append(s.Rejected, o.Rejected...)
}

// PeerFetch is what asking the other nodes of a cluster for a Definition
// did for one request (actors.DefinitionSource): the requests made, the
// Definition fetched and its bytes, the images rejected, the time it took,
// and what the pass should warn about.
type PeerFetch struct {
	Asked    int
	Fetched  int
	Bytes    int64
	Rejected int
	Ns       int64
	Warnings []string
}

// Add sums another request's PeerFetch into f.
func (f *PeerFetch) Add(o PeerFetch) {
	f.Asked += o.Asked
	f.Fetched += o.Fetched
	f.Bytes += o.Bytes
	f.Rejected += o.Rejected
	f.Ns += o.Ns
	f.Warnings = append(f.Warnings, o.Warnings...)
}
