package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/budgetd/budgetd/durable/record"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/wal"
)

// batch is a run of records read from the log, written as one store write.
type batch struct {
	from, to wal.Position
	spans    []schema.Span
}

// token is the batch's dedup token: a function of the log's identity and
// the records the batch holds, so a batch rebuilt after a crash carries the
// token of the original, and no other log — a recreated directory, another
// budgetd writing to the same database — ever makes the same token.
func (b *batch) token(logID string) string {
	if logID == legacyIdentity {
		return fmt.Sprintf("wal-%d-%d-%d-%d", b.from.Segment, b.from.Offset, b.to.Segment, b.to.Offset)
	}
	return fmt.Sprintf("w%s-%d-%d-%d-%d", logID, b.from.Segment, b.from.Offset, b.to.Segment, b.to.Offset)
}

// drain is the drainer goroutine. ctx ends only when Shutdown gives up.
func (d *Durable) drain(ctx context.Context, cp checkpoint) {
	defer close(d.done)
	// stopCtx also ends when Shutdown asks to stop. The reader still
	// returns every record already in the log after that; only waiting for
	// new ones ends, which is exactly "drain what is there, then stop".
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-stopCtx.Done():
		}
	}()

	start := cp.Acked
	if first := d.wal.First(); start.Before(first) {
		// Segments before the checkpoint were deleted after being stored.
		start = first
	}
	// Batches are named by their range, so the range must start at the same
	// position whichever way the drainer came to it.
	d.mu.Lock()
	d.acked = start
	d.mu.Unlock()
	r := d.wal.NewReader(start)
	defer r.Close()

	if cp.Pending != nil && start.Before(*cp.Pending) {
		b, err := d.readRange(ctx, r, start, *cp.Pending)
		if err != nil {
			d.log.Error("wal: cannot rebuild the pending batch", "err", err)
			return
		}
		d.count(func(c *Counters) { c.Replayed++ })
		// A pending batch saved by a budgetd before log identities is
		// written again under the token it was first written under.
		if !d.store1(ctx, b, cmp.Or(cp.Log, legacyIdentity)) {
			return
		}
	}
	lastSpans := 0
	for {
		b, err := d.collect(stopCtx, r, lastSpans)
		if b.from != b.to && !d.store1(ctx, b, d.id) {
			return
		}
		lastSpans = len(b.spans)
		if err != nil {
			return // drained and stopping, the log closed, or Shutdown gave up
		}
	}
}

// readRange reads the records from from to to into one batch.
func (d *Durable) readRange(ctx context.Context, r *wal.Reader, from, to wal.Position) (batch, error) {
	b := batch{from: from, to: from}
	for b.to.Before(to) {
		payload, end, err := r.Next(ctx)
		if err != nil {
			return b, err
		}
		b.to = end
		b.spans = d.decode(b.spans, payload)
	}
	return b, nil
}

// collect reads records until the batch holds BatchSpans spans or
// BatchBytes decoded (its records and the spans' structures: an
// attribute-heavy record takes ten times its size decoded), or
// FlushInterval passed since its first record. It returns an error —
// after the records collected so far — when stopCtx ends and the log
// holds nothing more.
//
// The batch's spans start with room for expect of them, the size of the
// batch before: grown from nothing by append, a full batch of 20,000
// spans (5 MB of span structs) was copied ten times on its way and
// allocated about five times its size, 12 % of the bytes a loaded budgetd
// allocated (docs/performance.md, Round 2's step 29). The sink may keep
// the slice, so it cannot be reused instead.
func (d *Durable) collect(stopCtx context.Context, r *wal.Reader, expect int) (batch, error) {
	d.mu.Lock()
	b := batch{from: d.acked, to: d.acked}
	d.mu.Unlock()
	if expect > 0 {
		b.spans = make([]schema.Span, 0, expect)
	}
	var flushAt time.Time
	bytes := 0
	for len(b.spans) < d.cfg.WAL.BatchSpans && bytes < d.cfg.WAL.BatchBytes {
		ctx, cancel := stopCtx, context.CancelFunc(func() {})
		if !flushAt.IsZero() {
			ctx, cancel = context.WithDeadline(stopCtx, flushAt)
		}
		payload, end, err := r.Next(ctx)
		cancel()
		switch {
		case err == nil:
			if flushAt.IsZero() {
				flushAt = time.Now().Add(d.cfg.WAL.FlushInterval)
			}
			b.to = end
			n := len(b.spans)
			b.spans = d.decode(b.spans, payload)
			bytes += len(payload) + record.HeldBytes(b.spans[n:])
		case errors.Is(err, context.DeadlineExceeded) && stopCtx.Err() == nil:
			return b, nil // flush interval passed
		default:
			return b, err
		}
	}
	return b, nil
}

func (d *Durable) decode(spans []schema.Span, payload []byte) []schema.Span {
	spans, err := record.AppendDecodedSpans(spans, payload)
	if err != nil {
		// A record that passed its checksum but does not decode was
		// written by something else; it cannot be stored, only counted.
		d.count(func(c *Counters) { c.DecodeErrors++ })
		d.log.Error("wal: undecodable record skipped", "err", err)
	}
	return spans
}

// store1 writes one batch: checkpoint the range as pending, write it under
// the range's token until the store has it (spans the store refuses go to
// the dead letter), then advance the checkpoint, feed the sink and drop the
// log behind. It returns false when ctx ended first.
func (d *Durable) store1(ctx context.Context, b batch, logID string) bool {
	if err := saveCheckpoint(d.cfg.WAL.Dir, checkpoint{Log: d.id, Acked: b.from, Pending: &b.to}); err != nil {
		d.log.Error("wal: checkpoint failed", "err", err)
	}
	d.mu.Lock()
	d.writingSince = time.Now()
	d.mu.Unlock()
	dead := 0
	if len(b.spans) > 0 {
		var err error
		if dead, err = d.writer.writeSpans(ctx, b.token(logID), b.spans); err != nil {
			return false
		}
	}
	if err := saveCheckpoint(d.cfg.WAL.Dir, checkpoint{Log: d.id, Acked: b.to}); err != nil {
		d.log.Error("wal: checkpoint failed", "err", err)
	}
	// The sink (analysis) gets the spans before they are counted, so the
	// counter — budgetd_wal_stored_spans_total — says "stored and handed
	// on", which is what anyone waiting for the analysis to see them needs.
	// Dead-lettered spans go to the analysis too: they were acknowledged,
	// and their timing is as true as the rest of their trace's.
	if len(b.spans) > 0 {
		d.sink.Spans(b.spans)
	}
	d.mu.Lock()
	d.acked = b.to
	d.writingSince = time.Time{}
	d.counts.Batches++
	d.counts.Spans += uint64(len(b.spans) - dead)
	d.counts.DeadLetter += uint64(dead)
	d.mu.Unlock()
	if err := d.wal.Truncate(b.to); err != nil {
		d.log.Error("wal: truncate failed", "err", err)
	}
	return true
}
