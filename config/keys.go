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
			end := state()
			for _, v := range g.block.variants {
				last := lit(cur, v)
				n.eps[last] = append(n.eps[last], end)
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

// keyOverlap returns a text both a and b make, if there is one.
func keyOverlap(a, b *keyNFA) (string, bool) {
	type pair struct{ x, y int }
	type step struct {
		from pair
		c    int // the byte read, or -1 for an ε move
	}
	start := pair{}
	seen := map[pair]step{start: {from: start, c: -1}}
	queue := []pair{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p.x == a.final && p.y == b.final {
			var text []byte
			for q := p; q != start; q = seen[q].from {
				if c := seen[q].c; c >= 0 {
					text = append(text, byte(c))
				}
			}
			slices.Reverse(text)
			return string(text), true
		}
		visit := func(q pair, c int) {
			if _, ok := seen[q]; !ok {
				seen[q] = step{from: p, c: c}
				queue = append(queue, q)
			}
		}
		for _, t := range a.eps[p.x] {
			visit(pair{t, p.y}, -1)
		}
		for _, t := range b.eps[p.y] {
			visit(pair{p.x, t}, -1)
		}
		for _, ea := range a.edges[p.x] {
			for _, eb := range b.edges[p.y] {
				if lo, hi := max(ea.lo, eb.lo), min(ea.hi, eb.hi); lo <= hi {
					visit(pair{ea.to, eb.to}, int(lo))
				}
			}
		}
	}
	return "", false
}
