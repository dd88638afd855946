package ingest

import (
	"errors"
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/durable/record"
	"github.com/budgetd/budgetd/schema"
)

// byteBudget bounds the request memory held at once over both transports:
// bodies being read (HTTP), then requests being decoded, converted and
// committed, charged for what they take decoded (decodedSize) and for the
// log record Commit encodes their spans into (withRecord). The request
// slots bound how many requests are processed at once; they are taken only
// once a request has been read, so a slow sender holds bytes of this
// budget — as many as it has sent — but never a slot.
type byteBudget struct {
	max   int64
	gauge prometheus.Gauge

	mu   sync.Mutex
	used int64
}

// tryAcquire reserves n bytes, or reports false when they do not fit.
func (b *byteBudget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	b.gauge.Set(float64(b.used))
	return true
}

// clamp caps a charge at the whole budget: a request estimated to take
// more than the budget is admitted alone, when nothing else is held,
// rather than never.
func (b *byteBudget) clamp(n int64) int64 { return min(n, b.max) }

func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.gauge.Set(float64(b.used))
	b.mu.Unlock()
}

// withRecord is a request's charge of the in-flight budget, charged so far
// (what it takes decoded), with the write-ahead log record Commit encodes
// its spans into added when the Durability copies them into one
// (record.Size: about its protobuf's size for realistic spans, more for
// numbers, whose text is longer than their wire form, and for a
// resource's service name and a scope's name and version, which the
// record repeats for each span). The record is held while the request
// is, so the charge counts it: without it, a request of long strings held
// 1.7 times what it was charged.
func (s *Server) withRecord(charged int64, spans []schema.Span) int64 {
	if !s.reuseRequests || len(spans) == 0 {
		return charged
	}
	return max(charged, s.inflight.clamp(charged+int64(record.Size(spans))))
}

// budgetStep is how much a body being read reserves at a time.
const budgetStep = 256 << 10

// budgetReader reserves budget for the bytes it reads, budgetStep at a
// time, and fails with errBudgetFull when the budget has no room. The
// caller releases reserved when the request is done.
type budgetReader struct {
	r        io.Reader
	budget   *byteBudget
	read     int64
	reserved int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if br.read == br.reserved {
		if !br.budget.tryAcquire(budgetStep) {
			return 0, errBudgetFull
		}
		br.reserved += budgetStep
	}
	if room := br.reserved - br.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := br.r.Read(p)
	br.read += int64(n)
	return n, err
}

// errBudgetFull is a request refused because ingest.max_in_flight_bytes
// was reached: momentary, answered 503 / UNAVAILABLE with a retry delay.
var errBudgetFull = errors.New("ingest is holding ingest.max_in_flight_bytes of requests")

// reserveTotal grows what the reader has reserved to n bytes (what the
// request it read takes decoded), or reports false when the budget has no
// room for the rest. What it reserved stays reserved either way, for the
// caller to release.
func (br *budgetReader) reserveTotal(n int64) bool {
	extra := n - br.reserved
	if extra <= 0 {
		return true
	}
	if !br.budget.tryAcquire(extra) {
		return false
	}
	br.reserved = n
	return true
}
