package pipeline

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// A finding is identified by its id (analyze.FindingID): an edge's
// latency_inversion has the same id at every evaluation that finds it, and a
// trace analysed again (late spans re-opened it) yields the same ids for the
// same findings. This file keeps the pipeline from writing and counting such
// a finding as if it were new.

// edgeVerdict is what the pipeline remembers of one edge finding of the last
// evaluation.
type edgeVerdict struct {
	content  [sha256.Size]byte // contentOf the finding
	storedAt time.Time         // when a row with this content was stored; zero while none is
}

// edgeVerdicts are the edge findings of the last evaluation, by id. An edge
// has at most one finding, so they are bounded by the edges the analyzer
// tracks (analyze.max_edges).
type edgeVerdicts map[string]edgeVerdict

// next judges the findings of an evaluation at now against the previous one
// (v). It returns the verdicts to remember, the findings whose verdict
// started to hold (none of that id in the previous evaluation) and the
// findings to write: those whose content changed or was never stored, and
// those stored at least restate (the edge window) ago. A verdict that still
// holds unchanged is the same finding: writing it again would only add a
// row. It is written again once its row is restate old all the same,
// because reads select findings by detected_at: a window of reads an edge
// window (plus an evaluation interval) long must still show a verdict that
// holds on evidence that has not changed.
func (v edgeVerdicts) next(findings []schema.Finding, now time.Time, restate time.Duration) (next edgeVerdicts, started, write []schema.Finding) {
	next = make(edgeVerdicts, len(findings))
	for _, f := range findings {
		if _, dup := next[f.ID]; dup {
			continue
		}
		cur := edgeVerdict{content: contentOf(f)}
		prev, held := v[f.ID]
		if !held {
			started = append(started, f)
		}
		if held && prev.content == cur.content && !prev.storedAt.IsZero() && now.Sub(prev.storedAt) < restate {
			cur.storedAt = prev.storedAt
		} else {
			write = append(write, f)
		}
		next[f.ID] = cur
	}
	return next, started, write
}

// stored records that the findings were stored at now.
func (v edgeVerdicts) stored(findings []schema.Finding, now time.Time) {
	for _, f := range findings {
		if cur, ok := v[f.ID]; ok {
			cur.storedAt = now
			v[f.ID] = cur
		}
	}
}

// contentOf hashes everything the findings table stores of f except its
// detection time: two findings with the same content are the same row but
// for detected_ns.
func contentOf(f schema.Finding) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{f.ID, string(f.Kind), string(f.Severity), f.TraceID, f.SpanID, f.Service, f.Operation,
		f.CallerService, f.CalleeService, f.Path, f.Message} {
		writeString(h, s)
	}
	for _, k := range slices.Sorted(maps.Keys(f.Evidence)) {
		writeString(h, k)
		h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(f.Evidence[k])))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// writeString writes s length-prefixed, so that no two sequences of strings
// hash alike.
func writeString(h hash.Hash, s string) {
	h.Write(binary.AppendUvarint(nil, uint64(len(s))))
	h.Write([]byte(s))
}

// maxCountedFindings bounds the finding ids countedFindings holds across
// traces (8 bytes each): a trace with thousands of findings must not make
// the memory of them grow without end.
const maxCountedFindings = 1 << 20

// countedFindings remembers which findings the metrics counted for each of
// the most recently analysed traces that had any, so that analysing a trace
// again counts only the findings the new analysis adds. It holds at most
// maxTraces traces (the assembler cannot re-open a trace it no longer
// remembers, analyze.assembly.remember_closed) and maxIDs ids, forgetting
// the oldest traces first; a trace re-opened after it was forgotten has its
// findings counted again. Safe for concurrent use.
type countedFindings struct {
	mu        sync.Mutex
	maxTraces int
	maxIDs    int
	ids       map[schema.TraceID][]uint64 // sorted hashes of the counted ids
	order     []schema.TraceID            // the traces of ids, oldest first
	held      int                         // ids held across traces
}

func newCountedFindings(maxTraces, maxIDs int) *countedFindings {
	return &countedFindings{maxTraces: maxTraces, maxIDs: maxIDs, ids: make(map[schema.TraceID][]uint64)}
}

// fresh returns the findings of an analysis of trace id that no earlier
// analysis of it produced, and remembers them as counted. It returns fs
// itself when all are fresh.
func (c *countedFindings) fresh(id schema.TraceID, fs []schema.Finding) []schema.Finding {
	if len(fs) == 0 || c.maxTraces == 0 {
		return fs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, known := c.ids[id]
	out := fs
	if known {
		out = make([]schema.Finding, 0, len(fs))
	}
	ids := prev
	for _, f := range fs {
		h := idHash(f.ID)
		if _, seen := slices.BinarySearch(prev, h); seen {
			continue
		}
		if known {
			out = append(out, f)
		}
		ids = append(ids, h)
	}
	if len(ids) == len(prev) {
		return out
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	c.held += len(ids) - len(prev)
	c.ids[id] = ids
	if !known {
		c.order = append(c.order, id)
	}
	for len(c.order) > 0 && (len(c.ids) > c.maxTraces || c.held > c.maxIDs) {
		c.held -= len(c.ids[c.order[0]])
		delete(c.ids, c.order[0])
		c.order = c.order[1:]
	}
	return out
}

// idHash maps a finding id to 64 bits. Ids are already hashes (hex), so a
// collision between two ids of one trace is as unlikely as any 64-bit one.
func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}
