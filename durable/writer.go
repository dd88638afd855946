package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// SpanStore is the part of the store the writer needs.
type SpanStore interface {
	// WriteSpans stores spans once per dedup token.
	WriteSpans(ctx context.Context, token string, spans []schema.Span) error
	// CheckWritable makes a small insert that proves the store takes
	// writes at all, so a refused span can be told from a refusing store.
	CheckWritable(ctx context.Context) error
}

// The classes of a failed store write, the `class` label of
// budgetd_store_write_errors_total.
const (
	// classUnavailable: the engine cannot be reached. Retried.
	classUnavailable = "unavailable"
	// classTimeout: the attempt ran out of time. Retried under the same
	// token, so a write that landed late is not stored twice.
	classTimeout = "timeout"
	// classStore: the engine answered with an error about its own state
	// (read-only, out of disk, too many parts, a missing table, access):
	// nothing about the spans; retried.
	classStore = "store"
	// classRefused: the engine refused the statement, which with a
	// healthy engine means the spans themselves. The batch is split until
	// the refused spans are found; they go to the dead letter.
	classRefused = "refused"
)

// storeStateCodes are ClickHouse error codes that describe the server, not
// the rows of an insert: retrying the same rows later is the cure.
var storeStateCodes = map[int]bool{
	60:  true, // UNKNOWN_TABLE
	81:  true, // UNKNOWN_DATABASE
	159: true, // TIMEOUT_EXCEEDED
	164: true, // READONLY
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	225: true, // NO_ZOOKEEPER
	236: true, // ABORTED
	242: true, // TABLE_IS_READ_ONLY
	243: true, // NOT_ENOUGH_SPACE
	279: true, // ALL_CONNECTION_TRIES_FAILED
	319: true, // UNKNOWN_STATUS_OF_INSERT
	394: true, // QUERY_WAS_CANCELLED
	497: true, // ACCESS_DENIED
	516: true, // AUTHENTICATION_FAILED
	999: true, // KEEPER_EXCEPTION
}

// Code 241, MEMORY_LIMIT_EXCEEDED, is refused: a smaller part of the batch
// may fit. A single span over the limit is not dead-lettered, though: the
// server may be short of memory for other reasons.
const codeMemoryLimit = 241

// codeTooManyParts is shared by "too many parts, merges are slower than
// inserts" (back-pressure: retry) and "too many partitions for single
// INSERT block" (the batch's shape: split).
const codeTooManyParts = 252

var errorCode = regexp.MustCompile(`(?i)\bcode:\s*(\d+)`)

// classify names a store write failure.
func classify(err error) string {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return classUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return classTimeout
	}
	code := engineCode(err)
	switch {
	case storeStateCodes[code]:
		return classStore
	case code == codeTooManyParts && !strings.Contains(strings.ToLower(err.Error()), "partitions"):
		return classStore
	}
	return classRefused
}

// engineCode is the ClickHouse error code in err's text, or 0.
func engineCode(err error) int {
	m := errorCode.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// writerConfig is how the writer retries.
type writerConfig struct {
	attemptTimeout time.Duration // one store write
	minBackoff     time.Duration // first wait after a failure
	maxBackoff     time.Duration // waits double up to this
}

// writer is the store writer of the write path: it writes a batch under
// its dedup token until the store has it, retrying what a retry can cure
// with capped exponential backoff, and splitting a batch the store
// refuses for its content until the refused spans are found, which go to
// the dead letter while the rest is stored. A span is dead-lettered only
// when the store refused it alone while a plain insert succeeded, so a
// store that refuses everything stops the drain (and /readyz says so)
// rather than emptying it into the dead letter.
type writer struct {
	cfg      writerConfig
	store    SpanStore
	dead     *deadLetter
	log      *slog.Logger
	throttle *throttle
	failed   func(class string) // counts a failed attempt
}

// write stores spans under token and returns how many went to the dead
// letter. It returns an error only when ctx ended first.
func (w *writer) write(ctx context.Context, token string, spans []schema.Span) (dead int, err error) {
	backoff := w.cfg.minBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, w.cfg.attemptTimeout)
		err := w.store.WriteSpans(actx, token, spans)
		cancel()
		if err == nil {
			return 0, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("write spans: %w", ctx.Err())
		}
		class := classify(err)
		w.failed(class)
		if class == classRefused {
			if len(spans) > 1 {
				// Halves get tokens of their own, derived from the
				// batch's, so a replay after a crash splits the same
				// way and dedups the halves already stored.
				mid := len(spans) / 2
				d1, err := w.write(ctx, token+"a", spans[:mid])
				if err != nil {
					return d1, err
				}
				d2, err := w.write(ctx, token+"b", spans[mid:])
				return d1 + d2, err
			}
			if ok, err := w.deadLetter(ctx, spans, err); ok || err != nil {
				return 1, err
			}
		}
		w.logFailure(class, len(spans), err, backoff)
		if !sleep(ctx, backoff) {
			return 0, fmt.Errorf("write spans: %w", ctx.Err())
		}
		backoff = min(2*backoff, w.cfg.maxBackoff)
	}
}

// deadLetter moves one refused span to the dead letter when the store
// takes other writes; it reports whether it did.
func (w *writer) deadLetter(ctx context.Context, spans []schema.Span, cause error) (bool, error) {
	if engineCode(cause) == codeMemoryLimit {
		return false, nil
	}
	actx, cancel := context.WithTimeout(ctx, w.cfg.attemptTimeout)
	perr := w.store.CheckWritable(actx)
	cancel()
	if perr != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("write spans: %w", ctx.Err())
		}
		return false, nil
	}
	path, err := w.dead.write(spans)
	if err != nil {
		w.log.Error("dead letter failed; the span stays in the log", "err", err)
		return false, nil
	}
	if ok, suppressed := w.throttle.allow("dead-letter", time.Now()); ok {
		s := &spans[0]
		w.log.Error("store refused a span; moved to the dead letter", "file", path, "trace_id", s.TraceID.String(),
			"span_id", s.SpanID.String(), "service", s.Service, "err", cause, "suppressed", suppressed)
	}
	return true, nil
}

func (w *writer) logFailure(class string, spans int, err error, backoff time.Duration) {
	if ok, suppressed := w.throttle.allow("write:"+class, time.Now()); ok {
		w.log.Warn("store write failed; retrying", "class", class, "spans", spans, "backoff", backoff,
			"suppressed", suppressed, "err", err)
	}
}

// sleep waits d, or less when ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// throttle lets one log line per key through per interval and counts the
// ones it held back: while the store is down every attempt fails, and the
// metrics count them all.
type throttle struct {
	every time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

func newThrottle(every time.Duration) *throttle {
	return &throttle{every: every, last: map[string]time.Time{}, held: map[string]int{}}
}

// allow reports whether a line for key may be logged now, and how many
// were held back since the last one.
func (t *throttle) allow(key string, now time.Time) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, seen := t.last[key]; seen && now.Sub(last) < t.every {
		t.held[key]++
		return false, 0
	}
	t.last[key] = now
	suppressed = t.held[key]
	t.held[key] = 0
	return true, suppressed
}
