package peer

import "container/list"

// heldImages is the images a node holds for the cluster, bounded by their
// bytes: the least recently served goes first. A node with a store on disk
// still serves an image it dropped (lookup reads the disk); one without
// grants the next asker a claim, and the key is recorded once more.
type heldImages struct {
	max   int64
	bytes int64
	order *list.List // of uint64 full_keys, most recently used at the front
	byKey map[uint64]heldEntry
}

type heldEntry struct {
	held
	at *list.Element
}

func newHeldImages(max int64) *heldImages {
	return &heldImages{max: max, order: list.New(), byKey: map[uint64]heldEntry{}}
}

// get finds fullKey's image and marks it used.
func (hs *heldImages) get(fullKey uint64) (held, bool) {
	e, ok := hs.byKey[fullKey]
	if !ok {
		return held{}, false
	}
	hs.order.MoveToFront(e.at)
	return e.held, true
}

// has is get without marking it used.
func (hs *heldImages) has(fullKey uint64) bool {
	_, ok := hs.byKey[fullKey]
	return ok
}

// put keeps h as fullKey's image and drops the least recently used others
// until the bytes held are within the bound (h itself stays, even alone
// over it: it is about to be served).
func (hs *heldImages) put(fullKey uint64, h held) {
	if e, ok := hs.byKey[fullKey]; ok {
		hs.bytes -= int64(len(e.image))
		hs.order.Remove(e.at)
	}
	hs.byKey[fullKey] = heldEntry{held: h, at: hs.order.PushFront(fullKey)}
	hs.bytes += int64(len(h.image))
	for hs.bytes > hs.max && hs.order.Len() > 1 {
		last := hs.order.Back()
		fk := last.Value.(uint64)
		hs.bytes -= int64(len(hs.byKey[fk].image))
		hs.order.Remove(last)
		delete(hs.byKey, fk)
	}
}
