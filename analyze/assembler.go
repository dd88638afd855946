package analyze

import (
	"errors"
	"slices"
	"time"
	"unsafe"

	"github.com/budgetd/budgetd/schema"
)

// AssemblerConfig bounds trace assembly (the analyze.assembly section).
type AssemblerConfig struct {
	// Idle is how long a trace must receive no span before it is analysed.
	Idle time.Duration `yaml:"idle"`
	// MaxWait is the longest a trace waits after its first span, even while
	// spans keep arriving.
	MaxWait time.Duration `yaml:"max_wait"`
	// MaxTraces bounds the traces held at once; spans of further traces are
	// dropped and counted until some are analysed.
	MaxTraces int `yaml:"max_traces"`
	// MaxSpansPerTrace bounds one trace; further spans are dropped and counted.
	MaxSpansPerTrace int `yaml:"max_spans_per_trace"`
	// MaxSpans bounds the spans held across all traces; further spans are
	// dropped and counted.
	MaxSpans int `yaml:"max_spans"`
	// MaxBytes bounds the bytes of the spans held across all traces (what
	// Compact keeps of them, packed: heldSpanBytes and the packed bytes); further
	// spans are dropped and counted. With MaxSpans it bounds assembly's
	// memory whatever the spans carry.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxBytesPerTrace bounds the bytes held for one trace.
	MaxBytesPerTrace int64 `yaml:"max_bytes_per_trace"`
	// RememberClosed is how many analysed trace ids are remembered so that a
	// late span re-opens its trace instead of starting a new one.
	RememberClosed int `yaml:"remember_closed"`
}

// DefaultAssemblerConfig returns DESIGN §5's defaults: 10 s idle, 5 min
// maximum wait.
func DefaultAssemblerConfig() AssemblerConfig {
	return AssemblerConfig{Idle: 10 * time.Second, MaxWait: 5 * time.Minute, MaxTraces: 100_000, MaxSpansPerTrace: 10_000,
		MaxSpans: 1_000_000, MaxBytes: 1 << 30, MaxBytesPerTrace: 64 << 20, RememberClosed: 100_000}
}

// Validate reports every setting that cannot work, naming its key.
func (c AssemblerConfig) Validate() error {
	var errs []error
	if c.Idle <= 0 {
		errs = append(errs, errors.New("analyze.assembly.idle must be > 0"))
	}
	if c.MaxWait < c.Idle {
		errs = append(errs, errors.New("analyze.assembly.max_wait must be >= analyze.assembly.idle"))
	}
	if c.MaxTraces <= 0 {
		errs = append(errs, errors.New("analyze.assembly.max_traces must be > 0"))
	}
	if c.MaxSpansPerTrace <= 0 {
		errs = append(errs, errors.New("analyze.assembly.max_spans_per_trace must be > 0"))
	}
	if c.MaxSpans < c.MaxSpansPerTrace {
		errs = append(errs, errors.New("analyze.assembly.max_spans must be >= analyze.assembly.max_spans_per_trace"))
	}
	if c.MaxBytesPerTrace <= 0 {
		errs = append(errs, errors.New("analyze.assembly.max_bytes_per_trace must be > 0"))
	}
	if c.MaxBytesPerTrace >= 1<<32 {
		// A held span's place in its trace's packed bytes is a uint32.
		errs = append(errs, errors.New("analyze.assembly.max_bytes_per_trace must be < 4 GiB"))
	}
	if c.MaxBytes < c.MaxBytesPerTrace {
		errs = append(errs, errors.New("analyze.assembly.max_bytes must be >= analyze.assembly.max_bytes_per_trace"))
	}
	if c.RememberClosed < 0 {
		errs = append(errs, errors.New("analyze.assembly.remember_closed must be >= 0"))
	}
	return errors.Join(errs...)
}

// AssemblerCounters count what assembly dropped or re-opened.
type AssemblerCounters struct {
	DroppedTraceOverflow uint64 // spans of new traces refused at MaxTraces
	DroppedSpanOverflow  uint64 // spans refused at MaxSpansPerTrace
	DroppedSpansFull     uint64 // spans refused at MaxSpans
	DroppedBytesFull     uint64 // spans refused at MaxBytes
	DroppedBytesOverflow uint64 // spans refused at MaxBytesPerTrace
	Reopened             uint64 // traces re-opened by late spans
}

// Assembled is a trace ready for analysis. Its spans stay packed as
// assembly held them until Spans unpacks them: the traces due at once hold
// hundreds of thousands of spans when the analysis falls behind, and
// unpacked they took several times the memory (docs/performance.md, round
// 2 step 32); the caller unpacks one round of traces at a time.
type Assembled struct {
	ID schema.TraceID
	// Reopened is true when the trace was analysed before and late spans
	// arrived: Spans returns only the late ones, and the caller merges them
	// with the stored trace before analysing it again.
	Reopened bool
	held     []heldSpan
	packed   string // the held spans' packed bytes
}

// Len returns how many spans the trace has.
func (t *Assembled) Len() int { return len(t.held) }

// Spans returns the trace's spans as Compact keeps them, unpacked anew at
// each call. The spans' attributes share one slice, each span's capped at
// its own: one allocation a trace rather than one a span.
func (t *Assembled) Spans() []schema.Span {
	n := 0
	for i := range t.held {
		n += int(t.held[i].attrs)
	}
	attrs := make(schema.Attributes, n)
	spans := make([]schema.Span, len(t.held))
	for i := range t.held {
		spans[i] = t.held[i].span(t.ID, t.packed, attrs)
		attrs = attrs[len(spans[i].Attrs):]
	}
	return spans
}

type pendingTrace struct {
	spans    []heldSpan
	packed   []byte // the spans' packed bytes, only appended to
	bytes    int64
	first    time.Time
	last     time.Time
	reopened bool
}

// Assembler groups spans into traces and releases each trace once it went
// idle or waited too long. It is pure — time comes in as arguments — and not
// safe for concurrent use.
type Assembler struct {
	cfg      AssemblerConfig
	pending  map[schema.TraceID]*pendingTrace
	closed   map[schema.TraceID]struct{}
	ring     []schema.TraceID // closed ids in closing order, for eviction
	held     int              // spans held across all pending traces
	bytes    int64            // their heldSpanBytes and packed bytes
	next     int
	counters AssemblerCounters
	// Add packs a batch into these before placing its spans.
	scratch    []byte
	batch      []heldSpan
	packedEnds []int
}

// maxScratchBytes is the most packed bytes Add keeps for the next batch:
// a drain batch of 20,000 of the harness's spans packs into about 1.3 MB
// (about 63 bytes a span in its heap profile, docs/performance.md step 46).
const maxScratchBytes = 4 << 20

// NewAssembler returns an empty assembler.
func NewAssembler(cfg AssemblerConfig) *Assembler {
	return &Assembler{
		cfg:     cfg,
		pending: make(map[schema.TraceID]*pendingTrace),
		closed:  make(map[schema.TraceID]struct{}),
		ring:    make([]schema.TraceID, 0, min(cfg.RememberClosed, 1024)),
	}
}

// Add takes spans that arrived at now. It holds only what Compact keeps of
// a span, packed (heldSpan), and Ready returns that: the caller need not
// compact them first, and keeps its slice.
func (a *Assembler) Add(spans []schema.Span, now time.Time) {
	if a.held >= a.cfg.MaxSpans {
		// Full: every span would be dropped at the first check below, so
		// none is packed.
		a.counters.DroppedSpansFull += uint64(len(spans))
		return
	}
	// A trace's spans mostly arrive together. The batch is packed first,
	// so that each trace's slices grow once by what the batch brings it
	// rather than doubling span by span: held memory stays near what the
	// spans need (BenchmarkHeldSpans), and slack is at most what spans
	// dropped here would have taken.
	type arrival struct{ spans, bytes int }
	arriving := make(map[schema.TraceID]arrival, len(spans)/8)
	a.scratch, a.batch, a.packedEnds = a.scratch[:0], a.batch[:0], a.packedEnds[:0]
	for i := range spans {
		start := len(a.scratch)
		var h heldSpan
		h, a.scratch = pack(&spans[i], a.scratch)
		a.batch = append(a.batch, h)
		a.packedEnds = append(a.packedEnds, len(a.scratch))
		ar := arriving[spans[i].TraceID]
		arriving[spans[i].TraceID] = arrival{ar.spans + 1, ar.bytes + len(a.scratch) - start}
	}
	for i := range spans {
		s := &spans[i]
		if a.held >= a.cfg.MaxSpans {
			a.counters.DroppedSpansFull++
			continue
		}
		start := 0
		if i > 0 {
			start = a.packedEnds[i-1]
		}
		packed := a.scratch[start:a.packedEnds[i]]
		size := heldSpanBytes + int64(len(packed))
		if a.bytes+size > a.cfg.MaxBytes {
			a.counters.DroppedBytesFull++
			continue
		}
		p, ok := a.pending[s.TraceID]
		if !ok {
			if len(a.pending) >= a.cfg.MaxTraces {
				a.counters.DroppedTraceOverflow++
				continue
			}
			p = &pendingTrace{first: now}
			if _, seen := a.closed[s.TraceID]; seen {
				p.reopened = true
				a.counters.Reopened++
			}
			a.pending[s.TraceID] = p
		}
		// A dropped span still counts as activity: the trace is not finished.
		p.last = now
		if len(p.spans) >= a.cfg.MaxSpansPerTrace {
			a.counters.DroppedSpanOverflow++
			continue
		}
		if p.bytes+size > a.cfg.MaxBytesPerTrace {
			a.counters.DroppedBytesOverflow++
			continue
		}
		if ar := arriving[s.TraceID]; ar.spans > 0 {
			p.spans = slices.Grow(p.spans, min(ar.spans, a.cfg.MaxSpansPerTrace-len(p.spans)))
			p.packed = slices.Grow(p.packed, int(min(int64(ar.bytes), a.cfg.MaxBytesPerTrace-p.bytes)))
			arriving[s.TraceID] = arrival{}
		}
		// Both fit in uint32: a trace's bytes are under
		// MaxBytesPerTrace, which Validate keeps under 4 GiB.
		h := a.batch[i]
		h.at, h.n = uint32(len(p.packed)), uint32(len(packed))
		p.packed = append(p.packed, packed...)
		p.spans = append(p.spans, h)
		p.bytes += size
		a.held++
		a.bytes += size
	}
	if cap(a.scratch) > maxScratchBytes {
		a.scratch, a.batch, a.packedEnds = nil, nil, nil // one large batch does not stay
	}
}

// Ready removes and returns the traces that are due at now: idle for Idle or
// waiting since MaxWait. With flush set every held trace is returned (on
// shutdown).
func (a *Assembler) Ready(now time.Time, flush bool) []Assembled {
	var out []Assembled
	for id, p := range a.pending {
		if !flush && now.Sub(p.last) < a.cfg.Idle && now.Sub(p.first) < a.cfg.MaxWait {
			continue
		}
		// The trace's packed bytes are not written again once it is
		// released: its spans' strings can share them without a copy.
		packed := unsafe.String(unsafe.SliceData(p.packed), len(p.packed))
		out = append(out, Assembled{ID: id, Reopened: p.reopened, held: p.spans, packed: packed})
		a.held -= len(p.spans)
		a.bytes -= p.bytes
		delete(a.pending, id)
		a.remember(id)
	}
	return out
}

// remember records a closed trace id, forgetting the oldest beyond
// RememberClosed.
func (a *Assembler) remember(id schema.TraceID) {
	if a.cfg.RememberClosed == 0 {
		return
	}
	if _, ok := a.closed[id]; ok {
		return
	}
	if len(a.ring) < a.cfg.RememberClosed {
		a.ring = append(a.ring, id)
	} else {
		delete(a.closed, a.ring[a.next])
		a.ring[a.next] = id
		a.next = (a.next + 1) % len(a.ring)
	}
	a.closed[id] = struct{}{}
}

// HeldBytes returns the bytes of the spans held (heldSpanBytes and their
// packed bytes each).
func (a *Assembler) HeldBytes() int64 { return a.bytes }

// Pending returns the number of traces and spans held.
func (a *Assembler) Pending() (traces, spans int) {
	return len(a.pending), a.held
}

// Counters returns what assembly dropped or re-opened so far.
func (a *Assembler) Counters() AssemblerCounters { return a.counters }
