package stages

// StoreLoad is what getting Definitions from somewhere other than a
// recording did, for a request or summed over a pass: from the Definition
// store on disk (Outcome.Store: the Definitions it loaded in place of
// recordings, and the entries it found bad there, each moved aside, then
// recorded again), or from the other nodes of a cluster (Outcome.Fetch, a
// PeerFetch: the requests made, the Definitions fetched, the images
// rejected, what the pass should warn about).
type StoreLoad struct {
	// Asked is the requests made of the cluster (a load from disk is not
	// one).
	Asked int
	// Loaded is the Definitions got: loaded from disk, or fetched.
	Loaded int
	Bytes  int64
	Ns     int64
	// Preloaded is how many of Loaded were loaded before the pass asked
	// (a preload): their time is the preload's, not in Ns.
	Preloaded int
	// Rejected is the bad entries or images found, each with why:
	// errors.Is(err, diskstore.ErrRejected) for an entry refused on load,
	// ErrDeviceRefused for one the device could not read.
	Rejected []error
	// Warnings go into the pass's warnings.
	Warnings []string
}

// PeerFetch is what asking the cluster did (actors.DefinitionSource).
type PeerFetch = StoreLoad

// Add sums another request's StoreLoad into s.
func (s *StoreLoad) Add(o StoreLoad) {
	s.Asked += o.Asked
	s.Loaded += o.Loaded
	s.Bytes += o.Bytes
	s.Ns += o.Ns
	s.Preloaded += o.Preloaded
	s.Rejected = append(s.Rejected, o.Rejected...)
	s.Warnings = append(s.Warnings, o.Warnings...)
}
