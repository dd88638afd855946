package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/logthrottle"
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

// The classes of a failed store write (in logs, and the reason label of
// budgetd_ingest_store_write_errors_total in batch mode).
const (
	// classUnavailable: the engine cannot be reached. Retried.
	classUnavailable = "unavailable"
	// classTimeout: the attempt ran out of time. Retried under the same
	// token, so a write that landed late is not stored twice.
	classTimeout = "timeout"
	// classStore: the engine answered with an error about its own state
	// (read-only, out of disk, too many parts, a missing table, access):
	// nothing about the spans; retried. So is a batch the store wrote in
	// part (store.ErrPartlyWritten): only its token's retry completes it.
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
	case errors.Is(err, store.ErrPartlyWritten):
		return classStore
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

// WriterConfig is how a Writer retries.
type WriterConfig struct {
	AttemptTimeout time.Duration // one store write
	MinBackoff     time.Duration // first wait after a failure
	MaxBackoff     time.Duration // waits double up to this
	// GiveUpAfter, when not 0, ends the retries this long after the first
	// failure, with the last error: the Batcher's senders are waiting, and
	// they retry on their own.
	GiveUpAfter time.Duration
	// MaxAttempts, when not 0, ends the retries after this many failed
	// attempts of one write, with the last error.
	MaxAttempts int
}

// Writer is the store writer of budgetd: the write-ahead log's drain, the
// batch mode and the analysis write through it. It writes a batch under
// its dedup token until the store has it, retrying what a retry can cure
// (see classify) with capped exponential backoff under the same token, so
// a write that landed but whose answer was lost is stored once. A batch
// the store refuses for its content is split in halves, each under a
// token derived from the batch's (a replay splits the same way and dedups
// what was stored), until the refused rows are alone; a row refused alone
// while a probe insert succeeds goes to Rows.Refused (spans: the dead
// letter) and the rest is stored. A store that refuses everything — the
// probe fails too — is retried, not emptied into the dead letter.
type Writer struct {
	cfg      WriterConfig
	probe    func(context.Context) error
	log      *slog.Logger
	throttle *logthrottle.Throttle
	failed   func(class string)
}

// NewWriter returns a Writer. probe is an insert that proves the store
// takes writes (store.Store.CheckWritable); failed, when not nil, counts
// every failed attempt by class.
func NewWriter(cfg WriterConfig, probe func(context.Context) error, log *slog.Logger, failed func(class string)) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if failed == nil {
		failed = func(string) {}
	}
	cfg.MinBackoff = max(cfg.MinBackoff, time.Millisecond)
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	return &Writer{cfg: cfg, probe: probe, log: log, throttle: logthrottle.New(10 * time.Second), failed: failed}
}

// Rows is one batch of n rows for Write.
type Rows struct {
	// What names the rows in logs: "spans", "hops", "findings".
	What string
	N    int
	// Write writes rows lo..hi-1 under token.
	Write func(ctx context.Context, token string, lo, hi int) error
	// Refused deals with row i, which the store refused alone for its
	// content (cause) while it took a probe insert: the spans' dead
	// letter, or dropping and counting a row the analysis can make again.
	// It reports whether it did; false keeps retrying the row.
	Refused func(i int, cause error) bool
}

// Write stores r under token and returns how many rows went to r.Refused.
// It returns an error only when ctx ended first or the retries gave up
// (WriterConfig.GiveUpAfter, MaxAttempts).
func (w *Writer) Write(ctx context.Context, token string, r Rows) (refused int, err error) {
	if r.N == 0 {
		return 0, nil
	}
	return w.write(ctx, token, r, 0, r.N)
}

func (w *Writer) write(ctx context.Context, token string, r Rows, lo, hi int) (refused int, err error) {
	backoff := w.cfg.MinBackoff
	var firstFail time.Time
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		err := r.Write(actx, token, lo, hi)
		cancel()
		if err == nil {
			return 0, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("write %s: %w", r.What, ctx.Err())
		}
		class := classify(err)
		w.failed(class)
		if class == classRefused {
			if hi-lo > 1 {
				mid := lo + (hi-lo)/2
				n1, err := w.write(ctx, token+"a", r, lo, mid)
				if err != nil {
					return n1, err
				}
				n2, err := w.write(ctx, token+"b", r, mid, hi)
				return n1 + n2, err
			}
			if ok, err := w.refuse(ctx, r, lo, err); ok || err != nil {
				return 1, err
			}
		}
		if firstFail.IsZero() {
			firstFail = time.Now()
		}
		if (w.cfg.GiveUpAfter > 0 && time.Since(firstFail)+backoff > w.cfg.GiveUpAfter) ||
			(w.cfg.MaxAttempts > 0 && attempt >= w.cfg.MaxAttempts) {
			w.logFailure(r.What, class, hi-lo, err, 0)
			return 0, fmt.Errorf("write %s: %w", r.What, err)
		}
		w.logFailure(r.What, class, hi-lo, err, backoff)
		if !sleep(ctx, backoff) {
			return 0, fmt.Errorf("write %s: %w", r.What, ctx.Err())
		}
		backoff = min(2*backoff, w.cfg.MaxBackoff)
	}
}

// refuse hands row i, refused alone, to r.Refused when the store takes
// other writes; it reports whether the row was dealt with.
func (w *Writer) refuse(ctx context.Context, r Rows, i int, cause error) (bool, error) {
	if engineCode(cause) == codeMemoryLimit || r.Refused == nil {
		return false, nil
	}
	actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
	perr := w.probe(actx)
	cancel()
	if perr != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("write %s: %w", r.What, ctx.Err())
		}
		return false, nil
	}
	return r.Refused(i, cause), nil
}

func (w *Writer) logFailure(what, class string, rows int, err error, backoff time.Duration) {
	if ok, suppressed := w.throttle.Allow(what+":"+class, time.Now()); ok {
		w.log.Warn("store write failed", "what", what, "class", class, "rows", rows, "will_retry", backoff > 0,
			"backoff", backoff, "suppressed", suppressed, "err", err)
	}
}

// spanWriter is the write path's use of the Writer: spans, with the ones
// the store refuses moved to the dead letter and counted.
type spanWriter struct {
	*Writer
	store     SpanStore
	dead      *deadLetter
	deadSpans prometheus.Counter
	log       *slog.Logger
	throttle  *logthrottle.Throttle
}

// newSpanWriter builds the span writer of cfg, with its dead letter and
// its counter.
func newSpanWriter(cfg Config, set Settings, giveUpAfter time.Duration, failed func(class string)) (*spanWriter, error) {
	dead, err := newDeadLetter(cfg.DeadLetterDir)
	if err != nil {
		return nil, err
	}
	w := &spanWriter{
		Writer: NewWriter(WriterConfig{AttemptTimeout: cfg.WriteTimeout, MinBackoff: minBackoff, MaxBackoff: cfg.MaxBackoff, GiveUpAfter: giveUpAfter},
			set.Store.CheckWritable, set.Logger, failed),
		store:    set.Store,
		dead:     dead,
		log:      set.Logger,
		throttle: logthrottle.New(10 * time.Second),
		deadSpans: prometheus.NewCounter(prometheus.CounterOpts{Name: "budgetd_store_dead_letter_spans_total",
			Help: "Spans the store refused for their content, moved to the dead-letter files (ingest.durability.dead_letter_dir)."}),
	}
	if err := set.Registerer.Register(w.deadSpans); err != nil {
		return nil, fmt.Errorf("register write path metrics: %w", err)
	}
	return w, nil
}

// maxWriteBytes bounds one store write of spans, as the store's insert
// blocks count them (store.SpanSizer): a write must fit in the attempt
// timeout, and the rows of a resource with large attributes repeat them
// (2,000 spans of a 2 MiB resource are a 4 GB write).
const maxWriteBytes = 64 << 20

// writeSpans stores spans under token and returns how many went to the
// dead letter. Spans over maxWriteBytes are written in parts of
// consecutive spans, each under the token with its part number and with
// an attempt timeout of its own; a replay splits the same way.
func (w *spanWriter) writeSpans(ctx context.Context, token string, spans []schema.Span) (dead int, err error) {
	var size store.SpanSizer
	start, bytes, part := 0, 0, 0
	for i := range spans {
		b := size.Bytes(&spans[i])
		if i > start && bytes+b > maxWriteBytes {
			n, err := w.writePart(ctx, token+"-s"+strconv.Itoa(part), spans[start:i])
			dead += n
			if err != nil {
				return dead, err
			}
			start, bytes, part = i, 0, part+1
		}
		bytes += b
	}
	if part > 0 {
		token += "-s" + strconv.Itoa(part)
	}
	n, err := w.writePart(ctx, token, spans[start:])
	return dead + n, err
}

func (w *spanWriter) writePart(ctx context.Context, token string, spans []schema.Span) (dead int, err error) {
	return w.Write(ctx, token, Rows{
		What: "spans",
		N:    len(spans),
		Write: func(ctx context.Context, token string, lo, hi int) error {
			return w.store.WriteSpans(ctx, token, spans[lo:hi])
		},
		Refused: func(i int, cause error) bool { return w.deadLetter(spans[i:i+1], cause) },
	})
}

// deadLetter writes refused spans to the dead letter; a span that cannot
// be written there stays in the log (false), retried.
func (w *spanWriter) deadLetter(spans []schema.Span, cause error) bool {
	path, err := w.dead.write(spans)
	if err != nil {
		w.log.Error("dead letter failed; the span stays in the log", "err", err)
		return false
	}
	w.deadSpans.Add(float64(len(spans)))
	if ok, suppressed := w.throttle.Allow("dead-letter", time.Now()); ok {
		s := &spans[0]
		w.log.Error("store refused a span; moved to the dead letter", "file", path, "trace_id", s.TraceID.String(),
			"span_id", s.SpanID.String(), "service", s.Service, "err", cause, "suppressed", suppressed)
	}
	return true
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
