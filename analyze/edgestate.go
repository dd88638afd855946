package analyze

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// Sharing edge statistics between replicas (DESIGN §7). Behind the
// Collector's trace-id load balancing each replica sees a uniform sample
// of every edge's calls: its own statistics are unbiased but hold 1/N of
// the samples, so an edge reaches min_edge_samples N times later and a
// verdict computed from one replica's memory differs from replica to
// replica. Each replica therefore publishes its window aggregates
// (EdgeStates) through the store, and judges edges over its own merged
// with the others' latest (EdgeFindingsWith): the same sketches and the
// same merge as its own time slices, so N replicas judge an edge as one
// node that saw every call would, up to one publication interval of lag.

// edgeStateVersion is the first byte of an encoded state; a replica that
// reads a version it does not know skips the state (and counts it).
const edgeStateVersion = 1

// errBadEdgeState is returned for a state that does not decode.
var errBadEdgeState = errors.New("decode edge state: malformed")

// EdgeStates returns this Analyzer's statistics of every edge with calls
// over the window ending at now, encoded for other replicas. Replica and
// EvaluatedNs are left for the caller to set.
func (a *Analyzer) EdgeStates(now time.Time) []schema.EdgeState {
	aggs := a.windowAggs(now)
	out := make([]schema.EdgeState, 0, len(aggs))
	for k, agg := range aggs {
		out = append(out, schema.EdgeState{
			CallerService: k.callerSvc, CallerOperation: k.callerOp, CalleeService: k.calleeSvc, CalleeOperation: k.calleeOp,
			State: agg.encode(),
		})
	}
	return out
}

// EdgeFindingsWith returns the latency_inversion findings of the window
// ending at now, judged over this Analyzer's statistics merged with
// others' (EdgeStates of other replicas). States that do not decode are
// left out; bad counts them.
func (a *Analyzer) EdgeFindingsWith(now time.Time, others []schema.EdgeState) (findings []schema.Finding, bad int) {
	aggs := a.windowAggs(now)
	for i := range others {
		o := &others[i]
		var agg edgeAgg
		if err := agg.decode(o.State); err != nil {
			bad++
			continue
		}
		aggOf(aggs, edgeKey{o.CallerService, o.CallerOperation, o.CalleeService, o.CalleeOperation}).merge(&agg)
	}
	return LatencyInversions(sortedStats(aggs, a.cfg.SkewToleranceMs), a.cfg, now), bad
}

// encode appends the aggregate's counts, sketches and tables as varints
// and float bits: a few bytes per sketch bucket, so a replica's states
// are a few hundred bytes per edge.
func (a *edgeAgg) encode() []byte {
	b := []byte{edgeStateVersion}
	b = binary.AppendUvarint(b, a.calls)
	b = binary.AppendUvarint(b, a.retries)
	b = binary.AppendUvarint(b, a.latency.count)
	b = binary.AppendUvarint(b, a.latency.zeros)
	b = appendBins(b, a.latency.bins)
	if a.timeouts.sk != nil {
		b = append(b, 1)
		b = binary.AppendUvarint(b, a.timeouts.sk.count)
		b = binary.AppendUvarint(b, a.timeouts.sk.zeros)
		b = appendBins(b, a.timeouts.sk.bins)
	} else {
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(a.timeouts.vals)))
		for _, v := range a.timeouts.vals {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.v))
			b = binary.AppendUvarint(b, v.n)
		}
	}
	for _, h := range []*waitHist{&a.wait.gaveUp, &a.wait.atDeadline} {
		b = binary.AppendUvarint(b, h.count)
		b = appendBins(b, h.bins)
	}
	b = binary.AppendUvarint(b, uint64(len(a.wait.answered.ms)))
	for _, ms := range a.wait.answered.ms {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(ms))
	}
	return b
}

// appendBins appends a bucket list: its length, then each bucket's index
// as the zig-zag difference from the previous one and its count.
func appendBins(b []byte, bins []bin) []byte {
	b = binary.AppendUvarint(b, uint64(len(bins)))
	prev := int32(0)
	for _, x := range bins {
		b = binary.AppendVarint(b, int64(x.idx)-int64(prev))
		b = binary.AppendUvarint(b, uint64(x.n))
		prev = x.idx
	}
	return b
}

// decode replaces a with the aggregate encode wrote. The buckets and values
// go through the same add functions as samples do, so a state from another
// replica cannot break the bounds and orderings the aggregate keeps.
func (a *edgeAgg) decode(data []byte) error {
	d := stateDecoder{b: data}
	if d.byte() != edgeStateVersion {
		return errBadEdgeState
	}
	*a = edgeAgg{calls: d.uvarint(), retries: d.uvarint()}
	a.latency = d.sketch()
	switch d.byte() {
	case 1:
		sk := d.sketch()
		a.timeouts.sk = &sk
	case 0:
		n := d.count(valueTableMax)
		for range n {
			v := d.float()
			a.timeouts.addN(v, d.uvarint())
		}
	default:
		d.err = errBadEdgeState
	}
	for _, h := range []*waitHist{&a.wait.gaveUp, &a.wait.atDeadline} {
		count := d.uvarint()
		for _, x := range d.bins(waitMaxBins) {
			h.bins = addBin(h.bins, x.idx, x.n, waitMaxBins)
		}
		h.count = count
	}
	for range d.count(maxAnswered) {
		a.wait.answered.add(d.float())
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errBadEdgeState
	}
	return d.err
}

// stateDecoder reads an encoded state; after the first error every read
// returns zero and err stays set.
type stateDecoder struct {
	b   []byte
	err error
}

func (d *stateDecoder) fail() { d.err, d.b = errBadEdgeState, nil }

func (d *stateDecoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *stateDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// count reads a length and refuses one above limit.
func (d *stateDecoder) count(limit int) int {
	n := d.uvarint()
	if n > uint64(limit) {
		d.fail()
		return 0
	}
	return int(n)
}

// bins reads a bucket list of at most limit buckets.
func (d *stateDecoder) bins(limit int) []bin {
	n := d.count(limit)
	out := make([]bin, 0, n)
	idx := int64(0)
	for range n {
		idx += d.varint()
		cnt := d.uvarint()
		if idx < math.MinInt32 || idx > math.MaxInt32 || cnt > math.MaxUint32 {
			d.fail()
		}
		if d.err != nil {
			return nil
		}
		out = append(out, bin{idx: int32(idx), n: uint32(cnt)})
	}
	return out
}

// sketch reads a latency or timeout sketch.
func (d *stateDecoder) sketch() sketch {
	s := sketch{count: d.uvarint(), zeros: d.uvarint()}
	for _, x := range d.bins(sketchMaxBins) {
		s.addBin(x.idx, x.n)
	}
	return s
}
