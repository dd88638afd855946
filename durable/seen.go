package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/schema"
)

// DedupConfig is the `ingest.durability.dedup` section: how long accepted
// spans are remembered so a resend is not stored twice.
type DedupConfig struct {
	// Window is how long a span's (trace id, span id) is remembered after
	// it was accepted; 0 turns deduplication off. It should cover the
	// senders' retry horizon (the Collector retries for up to 5 minutes by
	// default).
	Window time.Duration `yaml:"window"`
	// MaxSpans bounds the spans remembered (about 12 bytes each in
	// memory mapped outside Go's heap, budgetd_ingest_dedup_bytes; 8 on
	// disk). Past it the oldest are forgotten early, which shortens the
	// window (budgetd_ingest_dedup_window_seconds).
	MaxSpans int `yaml:"max_spans"`
}

// fpBytesPerSpan is what a remembered span takes in the fingerprint
// tables, with room for a rising load: 8 bytes a slot at a load of 2/3 in
// a generation made for an eighth more spans than the one before took (12
// bytes), 2/3–3/4 in one packed when it closed (10.7–12.2), and down to 3/8
// (21) in the generation taking new spans just after it doubled its table
// (TestSeenTablesUnderLoad). Only a window most of whose spans came in
// one generation's burst takes more than this.
const fpBytesPerSpan = 14

// TableBytes is what the fingerprint tables take with max_spans spans
// remembered: memory mapped outside Go's heap (fpMapping), which Go's
// memory limit leaves room for (memlimit.Bounds.Dedup).
func (c DedupConfig) TableBytes() int64 {
	if c.Window <= 0 {
		return 0
	}
	return int64(c.MaxSpans) * fpBytesPerSpan
}

// seenGenerations splits the window: a generation is forgotten whole.
const seenGenerations = 10

// seenSpans remembers the spans accepted in the last Window by a
// fingerprint of (trace id, span id), so a request resent after its
// acknowledgement was lost — the Collector resends at least once per
// kill — is acknowledged without being stored or analysed again. With a
// directory, each generation's fingerprints are appended to a file there
// (no fsync: they survive a killed process, not a lost machine) and read
// back at start, so a resend after a restart is caught too.
type seenSpans struct {
	log    *slog.Logger
	cfg    DedupConfig
	genLen time.Duration
	dir    string // "": memory only
	now    func() time.Time

	dups       prometheus.Counter
	remembered prometheus.Gauge
	window     prometheus.Gauge

	mu    sync.Mutex
	gens  []*seenGen // oldest first; the last takes new spans
	total int
}

type seenGen struct {
	start time.Time
	set   *fpSet
	file  *os.File // nil without a directory
}

// newSeenSpans loads the generations in dir that are still in the window
// and removes older ones. cfg.Window 0 returns nil: no deduplication.
func newSeenSpans(cfg DedupConfig, dir string, set Settings, now func() time.Time) (*seenSpans, error) {
	if cfg.Window <= 0 {
		return nil, nil
	}
	reg := set.Registerer
	s := &seenSpans{log: set.Logger, cfg: cfg, genLen: cfg.Window / seenGenerations, dir: dir, now: now,
		dups: prometheus.NewCounter(prometheus.CounterOpts{Name: "budgetd_ingest_duplicate_spans_total",
			Help: "Spans acknowledged but not stored again: their (trace id, span id) was accepted within ingest.durability.dedup.window (resends)."}),
		remembered: prometheus.NewGauge(prometheus.GaugeOpts{Name: "budgetd_ingest_dedup_spans",
			Help: "Accepted spans remembered to recognise resends (ingest.durability.dedup.max_spans bounds them)."}),
		window: prometheus.NewGauge(prometheus.GaugeOpts{Name: "budgetd_ingest_dedup_window_seconds",
			Help: "How far back resends are recognised now: ingest.durability.dedup.window, less when max_spans made budgetd forget early."}),
	}
	tables := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "budgetd_ingest_dedup_bytes",
		Help: "Memory of the tables remembering accepted spans (outside Go's heap; about 12 bytes a span)."},
		func() float64 { return float64(s.tableBytes()) })
	for _, c := range []prometheus.Collector{s.dups, s.remembered, s.window, tables} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dedup metrics: %w", err)
		}
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("open dedup directory: %w", err)
		}
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.rotate(s.now()); err != nil {
		return nil, err
	}
	return s, nil
}

// tableBytes is the memory of the generations' fingerprint tables.
func (s *seenSpans) tableBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.gens {
		n += 8 * len(g.set.slots)
	}
	return n
}

// fingerprint is FNV-1a over the trace and span ids: stable across
// restarts (it is stored), and with 64 bits two of a few million spans
// collide with a probability of about 10⁻⁶.
func fingerprint(s *schema.Span) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, b := range s.TraceID {
		h = (h ^ uint64(b)) * prime
	}
	for _, b := range s.SpanID {
		h = (h ^ uint64(b)) * prime
	}
	return h
}

// commit hands the spans not seen before to commit, and remembers them
// once it succeeded: the Commit of both modes. A resend of what was taken
// already is acknowledged as it was the first time.
func (s *seenSpans) commit(spans []schema.Span, commit func([]schema.Span) error) error {
	if s == nil {
		if len(spans) == 0 {
			return nil
		}
		return commit(spans)
	}
	fresh, fps, err := s.claim(spans)
	if err != nil || len(fresh) == 0 {
		return err
	}
	if err := commit(fresh); err != nil {
		s.forget(fps)
		return err
	}
	if err := s.keep(fps); err != nil {
		// The spans are accepted: the answer must say so. A resend of
		// them after a restart may be stored twice.
		s.log.Warn("resends of these spans may be stored twice", "err", err)
	}
	return nil
}

// claim returns the spans not seen before (spans itself when all are new)
// and their fingerprints, which it records at once so a concurrent resend
// is caught too. The caller either keeps them (keep) or, when the commit
// failed, gives them back (forget).
func (s *seenSpans) claim(spans []schema.Span) (fresh []schema.Span, fps []uint64, err error) {
	fresh, fps, dups, err := s.record(spans)
	s.dups.Add(float64(dups))
	return fresh, fps, err
}

// record is claim without counting the duplicates.
func (s *seenSpans) record(spans []schema.Span) (fresh []schema.Span, fps []uint64, dups int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.rotate(s.now()); err != nil {
		return nil, nil, 0, err
	}
	all := make([]uint64, len(spans))
	for i := range spans {
		all[i] = fingerprint(&spans[i])
	}
	// Each closed generation is asked about the whole request at once
	// (HasEach). A fresh span misses in every generation, each miss a
	// cache miss: asked together, a request's lookups overlap theirs,
	// where asked span by span each waited for the one before
	// (BenchmarkSeenSpansRecordFullWindow).
	known := make([]bool, len(spans))
	for _, g := range s.gens[:len(s.gens)-1] {
		g.set.HasEach(all, known)
	}
	// The current generation takes the rest, and knows a span twice in
	// one request too.
	// The fresh spans' fingerprints are gathered in place in all: entry i
	// is read before any append reaches it.
	cur := s.gens[len(s.gens)-1]
	fps = all[:0]
	for i, fp := range all {
		if known[i] || !cur.set.Add(fp) {
			if dups == 0 {
				fresh = append(make([]schema.Span, 0, len(spans)), spans[:i]...)
			}
			dups++
			continue
		}
		fps = append(fps, fp)
		if dups > 0 {
			fresh = append(fresh, spans[i])
		}
	}
	s.total += len(fps)
	s.remembered.Set(float64(s.total))
	if dups == 0 {
		fresh = spans
	}
	return fresh, fps, dups, nil
}

// remember adds the spans' fingerprints that are not known yet, and keeps
// them.
func (s *seenSpans) remember(spans []schema.Span) error {
	_, fps, _, err := s.record(spans)
	if err != nil {
		return err
	}
	return s.keep(fps)
}

// keep makes claimed fingerprints last: appended to the generation's file.
func (s *seenSpans) keep(fps []uint64) error {
	if s == nil || len(fps) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.gens[len(s.gens)-1].file
	if f == nil {
		return nil
	}
	buf := make([]byte, 8*len(fps))
	for i, fp := range fps {
		binary.LittleEndian.PutUint64(buf[8*i:], fp)
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("remember accepted spans: %w", err)
	}
	return nil
}

// forget gives back fingerprints of spans whose commit failed: the sender
// retries them, and they must then be taken.
func (s *seenSpans) forget(fps []uint64) {
	if s == nil || len(fps) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fp := range fps {
		for _, g := range s.gens {
			if g.set.Remove(fp) {
				s.total--
				break
			}
		}
	}
	s.remembered.Set(float64(s.total))
}

// rotate starts a new generation when the current one is genLen old, and
// forgets the generations out of the window or beyond MaxSpans.
func (s *seenSpans) rotate(now time.Time) error {
	if n := len(s.gens); n == 0 || now.Sub(s.gens[n-1].start) >= s.genLen {
		// Sized for as many spans as the generation before took, and an
		// eighth more: under a steady load, or one rising by less than an
		// eighth a generation, the table then never grows, where from the
		// smallest size it was rebuilt about a dozen times a generation.
		// The generation before takes no more spans: a table it outgrew
		// is packed.
		expect := 0
		if n > 0 {
			prev := s.gens[n-1].set
			prev.Pack()
			expect = prev.Len() + prev.Len()/8
		}
		g := &seenGen{start: now, set: newFPSet(expect)}
		if s.dir != "" {
			f, err := os.OpenFile(s.genPath(now), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
			if err != nil {
				return fmt.Errorf("remember accepted spans: %w", err)
			}
			g.file = f
		}
		s.gens = append(s.gens, g)
	}
	for len(s.gens) > 1 && (now.Sub(s.gens[0].start) > s.cfg.Window+s.genLen || s.total > s.cfg.MaxSpans) {
		s.drop()
	}
	s.window.Set(min(now.Sub(s.gens[0].start), s.cfg.Window).Seconds())
	return nil
}

// drop forgets the oldest generation.
func (s *seenSpans) drop() {
	g := s.gens[0]
	s.total -= g.set.Len()
	if g.file != nil {
		_ = g.file.Close()
		_ = os.Remove(g.file.Name())
	}
	s.gens[0] = nil
	s.gens = s.gens[1:]
	s.remembered.Set(float64(s.total))
}

func (s *seenSpans) genPath(start time.Time) string {
	return filepath.Join(s.dir, strconv.FormatInt(start.UnixNano(), 10)+".seen")
}

// load reads the generations written by an earlier run, oldest first.
func (s *seenSpans) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read dedup directory: %w", err)
	}
	now := s.now()
	var starts []int64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".seen")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		if now.Sub(time.Unix(0, ns)) > s.cfg.Window+s.genLen {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
			continue
		}
		starts = append(starts, ns)
	}
	slices.Sort(starts)
	for _, ns := range starts {
		data, err := os.ReadFile(s.genPath(time.Unix(0, ns)))
		if err != nil {
			return fmt.Errorf("read accepted spans: %w", err)
		}
		g := &seenGen{start: time.Unix(0, ns), set: newFPSet(len(data) / 8)}
		for i := 0; i+8 <= len(data); i += 8 {
			g.set.Add(binary.LittleEndian.Uint64(data[i:]))
		}
		s.gens = append(s.gens, g)
		s.total += g.set.Len()
	}
	// Loaded generations take no new spans: rotate starts a fresh one.
	if n := len(s.gens); n > 0 {
		s.gens[n-1].start = s.gens[n-1].start.Add(-s.genLen)
	}
	return nil
}

// close closes the generation files.
func (s *seenSpans) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gens {
		if g.file != nil {
			_ = g.file.Close()
		}
	}
}
