package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Reader reads durable records in log order, from a position on. It is used
// by one goroutine.
type Reader struct {
	w   *WAL
	pos Position
	f   *os.File
	br  *bufio.Reader
	sr  segmentReader
}

// NewReader returns a reader starting at from (a record boundary: the
// First position, or an end returned by Append or Next). A position in a
// segment that no longer exists starts at the oldest one.
func (w *WAL) NewReader(from Position) *Reader {
	return &Reader{w: w, pos: from}
}

// Next returns the next durable record and the position after it, waiting
// for one to be appended if the reader is at the end. It returns ctx's error
// when ctx ends first and ErrClosed when the log closes. The record's bytes
// are valid until the next call: a caller that keeps them copies them.
func (r *Reader) Next(ctx context.Context) ([]byte, Position, error) {
	for {
		r.w.mu.Lock()
		committed, closed, changed := r.w.committed, r.w.closed, r.w.changed
		segs := r.w.segments
		r.w.mu.Unlock()

		if r.pos.Before(committed) {
			payload, err := r.read(segs)
			if err == nil {
				return payload, r.pos, nil
			}
			if !errors.Is(err, io.EOF) {
				return nil, r.pos, err
			}
			continue // moved to the next segment
		}
		if closed {
			return nil, r.pos, ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, r.pos, ctx.Err()
		}
	}
}

// read returns the record at r.pos, opening segments as needed. io.EOF means
// the reader stepped to the next segment and should look again.
func (r *Reader) read(segs []uint64) ([]byte, error) {
	if r.f == nil {
		seq := r.pos.Segment
		if len(segs) > 0 && seq < segs[0] {
			seq, r.pos = segs[0], Position{Segment: segs[0]}
		}
		f, err := os.Open(r.w.segmentPath(seq))
		if err != nil {
			return nil, fmt.Errorf("read wal: %w", err)
		}
		if _, err := f.Seek(r.pos.Offset, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("read wal: %w", err)
		}
		r.f, r.br = f, bufio.NewReaderSize(f, 1<<20)
		r.sr = segmentReader{r: r.br, buf: r.sr.buf}
	}
	payload, n, err := r.sr.next()
	if errors.Is(err, io.EOF) {
		// The end of a segment that is no longer written: go to the next.
		next, ok := nextSegment(segs, r.pos.Segment)
		if !ok {
			return nil, fmt.Errorf("read wal: segment %d ended before the committed position", r.pos.Segment)
		}
		r.closeFile()
		r.pos = Position{Segment: next}
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("read wal segment %d at %d: %w", r.pos.Segment, r.pos.Offset, err)
	}
	r.pos.Offset += n
	return payload, nil
}

func nextSegment(segs []uint64, cur uint64) (uint64, bool) {
	for _, s := range segs {
		if s > cur {
			return s, true
		}
	}
	return 0, false
}

func (r *Reader) closeFile() {
	if r.f != nil {
		r.f.Close()
		r.f, r.br = nil, nil
	}
}

// Close releases the reader's file.
func (r *Reader) Close() { r.closeFile() }
