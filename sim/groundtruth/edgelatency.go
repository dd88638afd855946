package groundtruth

import (
	"sort"
	"time"
)

// edgeLatency is what one edge's calls give budgetd's latency figures (its
// p50 and p99 sketch): the callee's own duration where it has an
// invocation (the caller's span stops at its timeout), the call's
// otherwise. budgetd leaves out a callee that stopped with its caller's
// give-up or at its deadline, since its duration says when the wait ended,
// not how long the work takes (DESIGN §5). Which side of that tolerance a
// case falls on in budgetd's span figures is clear for some and a coin flip
// for others, so samples are split: in are counted, maybe are too close to
// tell; the clearly excluded are in neither.
type edgeLatency struct {
	in, maybe []time.Duration
}

// counted returns the fewest and most samples budgetd can count.
func (l *edgeLatency) counted() (least, most int) {
	return len(l.in), len(l.in) + len(l.maybe)
}

// medianBand returns the range the median budgetd uses can take: the 30th
// to 70th percentile of the counted samples, with and without the unsure
// ones. budgetd's median is a sketch over the calls it has analysed by the
// time it judges a trace, not over the whole run, and the median of a
// subset of twenty calls lies in that range with about 95 % probability;
// an edge whose calls split into fast and slow ones (attempts cut by
// different timers) has a median that jumps between the two. ok is false
// when fewer than MinEdgeSamples samples can be counted.
func (l *edgeLatency) medianBand() (lo, hi time.Duration, ok bool) {
	if _, most := l.counted(); most < MinEdgeSamples {
		return 0, 0, false
	}
	lo, hi = -1, -1
	for _, ds := range [][]time.Duration{l.in, append(append([]time.Duration(nil), l.in...), l.maybe...)} {
		if len(ds) == 0 {
			continue
		}
		sorted := append([]time.Duration(nil), ds...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		q := func(p float64) time.Duration { return sorted[int(p*float64(len(sorted)-1))] }
		if a := q(0.3); lo < 0 || a < lo {
			lo = a
		}
		if z := q(0.7); hi < 0 || z > hi {
			hi = z
		}
	}
	return lo, hi, true
}

// stopWidth is the width of one timer's firings at a wait of d: budgetd
// takes a callee that ends within it of its caller's give-up, or of its
// deadline, as stopping with it (2 % of the wait, at least its 5 ms
// tolerance).
func stopWidth(d time.Duration) time.Duration {
	return max(d/50, 5*time.Millisecond)
}

// edgeLatencies classifies the latency samples of every edge of the run.
func (b *Builder) edgeLatencies() map[[2]string]*edgeLatency {
	first := make([]*Invocation, len(b.log.Calls))
	for _, inv := range b.log.Invs {
		if inv.Call >= 0 && first[inv.Call] == nil {
			first[inv.Call] = inv
		}
	}
	out := map[[2]string]*edgeLatency{}
	for i, c := range b.log.Calls {
		k := [2]string{c.Caller, c.Callee}
		l := out[k]
		if l == nil {
			l = &edgeLatency{}
			out[k] = l
		}
		inv := first[i]
		if inv == nil {
			l.in = append(l.in, c.End.Sub(c.Start))
			continue
		}
		d := inv.End.Sub(inv.Start)
		switch b.stoppedEarly(c, inv) {
		case No:
			l.in = append(l.in, d)
		case Unsure:
			l.maybe = append(l.maybe, d)
		}
	}
	return out
}

// stoppedEarly judges whether budgetd takes invocation inv of call c as a
// callee that stopped with its caller's give-up (Yes when clearly, Unsure
// when too close to tell) or at one of the deadlines it may know it by
// (never more than Unsure: which deadline budgetd holds depends on what the
// spans record).
func (b *Builder) stoppedEarly(c *Call, inv *Invocation) Verdict {
	v := No
	if c.GaveUp {
		v = within(inv.End.Sub(c.End), stopWidth(c.End.Sub(c.Start)))
	}
	if v == No {
		for _, recorded := range []bool{true, false} {
			if dl, ok := b.Deadline(c.Trace, c.Parent, recorded); ok &&
				within(inv.End.Sub(dl), stopWidth(dl.Sub(inv.Start))) != No {
				return Unsure
			}
		}
	}
	return v
}

// within judges whether an instant d away from another lies within width
// of it: Yes when clearly, No when clearly not, Unsure within NoiseMargin
// of the edge. Both instants are span ends, as budgetd reads them; only the
// width, taken from the simulator's own start of the call, can differ.
func within(d, width time.Duration) Verdict {
	switch off := max(d, -d) - width; {
	case off <= -NoiseMargin:
		return Yes
	case off >= NoiseMargin:
		return No
	}
	return Unsure
}
