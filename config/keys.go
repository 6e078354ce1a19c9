package config

import "slices"

// The texts a Graph key template can make are a regular language: its
// literals, each {param} an int64 as strconv writes it ("0", or an optional
// '-', a nonzero digit and any digits), each {variant} one of the block's
// variant names. Two templates can make one text exactly when the product
// of their automata reaches both accepting states, which keyOverlap
// decides (and gives the text, for the message). Digit strings are not
// bounded to int64's 19 digits: a template that could only meet another
// past that length is taken to meet it, the safe side.

// keyNFA is a template's automaton: state 0 starts, final accepts.
type keyNFA struct {
	edges [][]keyEdge // by state
	eps   [][]int     // ε moves, by state
	final int
}

type keyEdge struct {
	lo, hi byte // a byte in [lo, hi] moves to to
	to     int
}

func (g *graphSpec) nfa() *keyNFA {
	n := &keyNFA{}
	state := func() int {
		n.edges = append(n.edges, nil)
		n.eps = append(n.eps, nil)
		return len(n.edges) - 1
	}
	edge := func(from int, lo, hi byte, to int) {
		n.edges[from] = append(n.edges[from], keyEdge{lo: lo, hi: hi, to: to})
	}
	lit := func(from int, s string) int {
		for i := 0; i < len(s); i++ {
			to := state()
			edge(from, s[i], s[i], to)
			from = to
		}
		return from
	}
	cur := state()
	for _, p := range g.parts {
		switch {
		case p.slot < 0:
			cur = lit(cur, p.lit)
		case p.slot == g.block.variantSlot:
			// The names as a trie, not one chain each: names sharing a
			// prefix share its states, so the product with another key
			// follows one path per text, not one per pair of names.
			end := state()
			next := map[[2]int]int{} // (state, byte) -> the trie's next state
			for _, v := range g.block.variants {
				at := cur
				for i := 0; i < len(v); i++ {
					to, ok := next[[2]int{at, int(v[i])}]
					if !ok {
						to = state()
						next[[2]int{at, int(v[i])}] = to
						edge(at, v[i], v[i], to)
					}
					at = to
				}
				n.eps[at] = append(n.eps[at], end)
			}
			cur = end
		default:
			neg, digits, end := state(), state(), state()
			edge(cur, '0', '0', end)
			edge(cur, '-', '-', neg)
			edge(cur, '1', '9', digits)
			edge(neg, '1', '9', digits)
			edge(digits, '0', '9', digits)
			n.eps[digits] = append(n.eps[digits], end)
			cur = end
		}
	}
	n.final = cur
	return n
}

// keyOverlap returns a text both a and b make, if there is one: a
// breadth-first search of the product automaton, whose states are pairs
// (x, y), numbered x·|b|+y in a dense table (the keys' bounds keep it
// small; a map was most of the search's time).
func keyOverlap(a, b *keyNFA) (string, bool) {
	nb := len(b.edges)
	type step struct {
		from int32 // the pair this one was reached from, +1 (0: unseen)
		c    int16 // the byte read, or -1 for an ε move
	}
	seen := make([]step, len(a.edges)*nb)
	seen[0] = step{from: 1, c: -1}
	queue := []int32{0}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		x, y := int(p)/nb, int(p)%nb
		if x == a.final && y == b.final {
			var text []byte
			for q := p; q != 0; q = seen[q].from - 1 {
				if c := seen[q].c; c >= 0 {
					text = append(text, byte(c))
				}
			}
			slices.Reverse(text)
			return string(text), true
		}
		visit := func(x, y, c int) {
			q := int32(x*nb + y)
			if seen[q].from == 0 {
				seen[q] = step{from: p + 1, c: int16(c)}
				queue = append(queue, q)
			}
		}
		for _, t := range a.eps[x] {
			visit(t, y, -1)
		}
		for _, t := range b.eps[y] {
			visit(x, t, -1)
		}
		for _, ea := range a.edges[x] {
			for _, eb := range b.edges[y] {
				if lo, hi := max(ea.lo, eb.lo), min(ea.hi, eb.hi); lo <= hi {
					visit(ea.to, eb.to, int(lo))
				}
			}
		}
	}
	return "", false
}
