package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrFull is returned by Append when the log holds its maximum size of
// records the store has not yet acknowledged. Ingest answers 503 with
// Retry-After: the sender keeps the data and tries again.
var ErrFull = errors.New("write-ahead log full")

// ErrClosed is returned by calls on a closed log.
var ErrClosed = errors.New("write-ahead log closed")

// headerSize is the length and checksum in front of every payload.
const headerSize = 8

// MaxRecordBytes bounds one record; a larger length in a header is corruption.
const MaxRecordBytes = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Config is the `ingest.durability.wal` section (the log itself).
type Config struct {
	Dir          string `yaml:"dir"`           // default ./data/wal
	SegmentBytes int64  `yaml:"segment_bytes"` // a segment is closed past this size; default 64 MiB
	MaxBytes     int64  `yaml:"max_bytes"`     // unacknowledged bytes before Append refuses; default 1 GiB
}

// DefaultConfig returns the WAL defaults.
func DefaultConfig() Config {
	return Config{Dir: "./data/wal", SegmentBytes: 64 << 20, MaxBytes: 1 << 30}
}

// Validate reports every setting that cannot work, naming its key.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("ingest.durability.wal.dir must not be empty"))
	}
	if c.SegmentBytes < 1<<20 {
		errs = append(errs, errors.New("ingest.durability.wal.segment_bytes must be >= 1048576"))
	}
	if c.MaxBytes < c.SegmentBytes {
		errs = append(errs, errors.New("ingest.durability.wal.max_bytes must be >= ingest.durability.wal.segment_bytes"))
	}
	return errors.Join(errs...)
}

// Position addresses a record boundary: the byte offset in a segment.
type Position struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
}

// Before reports whether p comes before q in the log.
func (p Position) Before(q Position) bool {
	return p.Segment < q.Segment || (p.Segment == q.Segment && p.Offset < q.Offset)
}

// Stats count what the log did; read them with WAL.Stats.
type Stats struct {
	Appends        uint64 // records appended
	Syncs          uint64 // fsyncs (Appends/Syncs is the group-commit factor)
	Full           uint64 // appends refused with ErrFull
	TruncatedBytes uint64 // bytes cut from torn or corrupt tails at Open
	CorruptRecords uint64 // records that failed their checksum at Open
	Bytes          int64  // bytes in the log now
}

// WAL is an open log. Append, Reader and Truncate are safe for concurrent use.
type WAL struct {
	cfg Config
	log *slog.Logger

	appends chan *appendReq
	stop    chan struct{}
	done    chan struct{}

	inflight sync.WaitGroup // appends between their closed check and their answer

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced whenever committed advances or the log closes
	segments  []uint64      // sequence numbers on disk, ascending
	file      *os.File      // the segment being appended to
	committed Position      // end of the last fsynced record
	bytes     int64         // total bytes of all segments
	closed    bool
	stats     Stats
}

type appendReq struct {
	payload []byte
	done    chan appendResult
}

type appendResult struct {
	end Position
	err error
}

// Open opens (or creates) the log in cfg.Dir, repairs a torn tail and starts
// the group-commit writer.
func Open(cfg Config, logger *slog.Logger) (*WAL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("open wal: %w", err)
	}
	w := &WAL{cfg: cfg, log: logger, appends: make(chan *appendReq, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	w.changed = make(chan struct{})
	segs, err := listSegments(cfg.Dir)
	if err != nil {
		return nil, err
	}
	for _, seq := range segs {
		size, err := w.repair(seq)
		if err != nil {
			return nil, err
		}
		w.bytes += size
	}
	if len(segs) == 0 {
		segs = []uint64{1}
	}
	w.segments = segs
	last := segs[len(segs)-1]
	f, err := os.OpenFile(w.segmentPath(last), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open wal segment: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open wal segment: %w", err)
	}
	w.file = f
	w.committed = Position{Segment: last, Offset: info.Size()}
	if err := syncDir(cfg.Dir); err != nil {
		f.Close()
		return nil, err
	}
	go w.writer()
	return w, nil
}

func (w *WAL) segmentPath(seq uint64) string {
	return filepath.Join(w.cfg.Dir, fmt.Sprintf("%020d.wal", seq))
}

func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list wal segments: %w", err)
	}
	var out []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, seq)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// repair checks every record of a segment and truncates it at the first
// record that is torn or fails its checksum. It returns the kept size.
func (w *WAL) repair(seq uint64) (int64, error) {
	path := w.segmentPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("repair wal segment %d: %w", seq, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("repair wal segment %d: %w", seq, err)
	}
	r := &segmentReader{r: f}
	var good int64
	for {
		_, n, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.stats.CorruptRecords++
			w.stats.TruncatedBytes += uint64(info.Size() - good)
			w.log.Warn("wal: truncating damaged segment tail", "segment", seq, "offset", good, "cut_bytes", info.Size()-good, "err", err)
			if err := f.Truncate(good); err != nil {
				return 0, fmt.Errorf("truncate wal segment %d: %w", seq, err)
			}
			if err := f.Sync(); err != nil {
				return 0, fmt.Errorf("sync wal segment %d: %w", seq, err)
			}
			break
		}
		good += n
	}
	return good, nil
}

// errCorrupt marks a record that is torn or fails its checksum.
var errCorrupt = errors.New("corrupt wal record")

// segmentReader reads records from one segment file.
type segmentReader struct {
	r   io.Reader
	hdr [headerSize]byte
	// buf holds the last payload. Its next record overwrites it: a
	// record per request (half a megabyte for 1,000 spans) read into a
	// new slice was 6 % of the bytes a loaded budgetd allocated, and its
	// readers decode a record before they read the next.
	buf []byte
}

// keptPayloadBytes is the largest buffer a segmentReader keeps for the
// next record; a rarer, larger record gets its own, so one huge record
// does not hold its size for the reader's lifetime.
const keptPayloadBytes = 4 << 20

// next returns the next payload, valid until the next call, and the
// record's size on disk. io.EOF means a clean end; errCorrupt a torn or
// damaged record.
func (s *segmentReader) next() ([]byte, int64, error) {
	n, err := io.ReadFull(s.r, s.hdr[:])
	if errors.Is(err, io.EOF) {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: torn header (%d bytes)", errCorrupt, n)
	}
	size := binary.LittleEndian.Uint32(s.hdr[0:4])
	sum := binary.LittleEndian.Uint32(s.hdr[4:8])
	if size > MaxRecordBytes {
		return nil, 0, fmt.Errorf("%w: length %d", errCorrupt, size)
	}
	var payload []byte
	switch {
	case int(size) <= cap(s.buf):
		payload = s.buf[:size]
	case size <= keptPayloadBytes:
		s.buf = make([]byte, size)
		payload = s.buf
	default:
		payload = make([]byte, size)
	}
	if _, err := io.ReadFull(s.r, payload); err != nil {
		return nil, 0, fmt.Errorf("%w: torn payload", errCorrupt)
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	return payload, headerSize + int64(size), nil
}

// Append writes payload as one record and returns once it is on disk
// (fsynced), with the position just after it. It returns ErrFull when the
// log is at its size cap.
func (w *WAL) Append(ctx context.Context, payload []byte) (Position, error) {
	if len(payload) > MaxRecordBytes {
		return Position{}, fmt.Errorf("append wal record: %d bytes exceeds %d", len(payload), MaxRecordBytes)
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return Position{}, ErrClosed
	case w.bytes+int64(len(payload)+headerSize) > w.cfg.MaxBytes:
		w.stats.Full++
		w.mu.Unlock()
		return Position{}, ErrFull
	}
	// Close waits for in-flight appends before it stops the writer, so a
	// queued record is always written and answered.
	w.inflight.Add(1)
	w.mu.Unlock()
	defer w.inflight.Done()
	req := &appendReq{payload: payload, done: make(chan appendResult, 1)}
	select {
	case w.appends <- req:
	case <-ctx.Done():
		return Position{}, ctx.Err()
	}
	// Once queued the record will be written whatever the caller does; wait
	// for the outcome so an acknowledgement is never sent for a failed write.
	res := <-req.done
	return res.end, res.err
}

// writer is the group-commit loop: it drains every queued append, writes
// them, fsyncs once and answers them all.
func (w *WAL) writer() {
	defer close(w.done)
	var batch []*appendReq
	var buf []byte
	for {
		select {
		case req := <-w.appends:
			batch = append(batch[:0], req)
		case <-w.stop:
			return
		}
	more:
		for len(batch) < cap(w.appends) {
			select {
			case req := <-w.appends:
				batch = append(batch, req)
			default:
				break more
			}
		}
		buf = buf[:0]
		ends := make([]Position, len(batch))
		w.mu.Lock()
		seg, off := w.committed.Segment, w.committed.Offset
		w.mu.Unlock()
		var err error
		for i, req := range batch {
			if off > 0 && off+int64(len(buf))+int64(headerSize+len(req.payload)) > w.cfg.SegmentBytes {
				// Close this segment before it grows past its size: write
				// what is buffered, then roll.
				if err = w.writeSync(buf); err != nil {
					break
				}
				w.advance(Position{seg, off + int64(len(buf))}, int64(len(buf)), 0)
				buf = buf[:0]
				if seg, err = w.roll(); err != nil {
					break
				}
				off = 0
			}
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(req.payload)))
			buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(req.payload, castagnoli))
			buf = append(buf, req.payload...)
			ends[i] = Position{seg, off + int64(len(buf))}
		}
		if err == nil {
			err = w.writeSync(buf)
		}
		if err == nil {
			w.advance(Position{seg, off + int64(len(buf))}, int64(len(buf)), uint64(len(batch)))
		} else {
			w.log.Error("wal: write failed", "err", err)
		}
		for i, req := range batch {
			req.done <- appendResult{end: ends[i], err: err}
		}
	}
}

// writeSync writes buf to the current segment and fsyncs it.
func (w *WAL) writeSync(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if _, err := w.file.Write(buf); err != nil {
		return fmt.Errorf("write wal: %w", err)
	}
	if err := w.file.Sync(); err != nil {
		return fmt.Errorf("sync wal: %w", err)
	}
	w.mu.Lock()
	w.stats.Syncs++
	w.mu.Unlock()
	return nil
}

// advance publishes newly durable records to readers.
func (w *WAL) advance(end Position, added int64, records uint64) {
	w.mu.Lock()
	w.committed = end
	w.bytes += added
	w.stats.Appends += records
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// roll closes the current segment and starts the next.
func (w *WAL) roll() (uint64, error) {
	w.mu.Lock()
	next := w.segments[len(w.segments)-1] + 1
	w.mu.Unlock()
	f, err := os.OpenFile(w.segmentPath(next), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o640)
	if err != nil {
		return 0, fmt.Errorf("roll wal segment: %w", err)
	}
	if err := syncDir(w.cfg.Dir); err != nil {
		f.Close()
		return 0, err
	}
	old := w.file
	w.mu.Lock()
	w.file = f
	w.segments = append(w.segments, next)
	w.committed = Position{Segment: next}
	w.mu.Unlock()
	if err := old.Close(); err != nil {
		return next, fmt.Errorf("close wal segment: %w", err)
	}
	return next, nil
}

// Truncate deletes every segment that lies wholly before upTo: the store
// has acknowledged all their records. The segment being written is kept.
func (w *WAL) Truncate(upTo Position) error {
	w.mu.Lock()
	var drop []uint64
	for len(w.segments) > 1 && w.segments[0] < upTo.Segment {
		drop = append(drop, w.segments[0])
		w.segments = w.segments[1:]
	}
	w.mu.Unlock()
	for _, seq := range drop {
		path := w.segmentPath(seq)
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("truncate wal: %w", err)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("truncate wal: %w", err)
		}
		w.mu.Lock()
		w.bytes -= info.Size()
		w.mu.Unlock()
	}
	if len(drop) > 0 {
		return syncDir(w.cfg.Dir)
	}
	return nil
}

// First returns the position of the oldest record on disk.
func (w *WAL) First() Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Position{Segment: w.segments[0]}
}

// Committed returns the end of the last durable record.
func (w *WAL) Committed() Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed
}

// Fits reports whether a record of n payload bytes would be taken by Append
// now rather than refused with ErrFull.
func (w *WAL) Fits(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes+int64(n+headerSize) <= w.cfg.MaxBytes
}

// Stats returns a snapshot of the log's counters.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Bytes = w.bytes
	return s
}

// Close refuses new appends, waits for those in flight, stops the writer and
// closes the segment. Readers waiting for records return ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	w.inflight.Wait()
	close(w.stop)
	<-w.done
	return w.file.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	return nil
}
