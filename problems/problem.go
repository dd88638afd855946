package problems

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// Problem is one thing to fix: the findings of one fingerprint (Key), with
// what an SRE needs to rank it and act on it. The JSON shape is public
// (`budgetd analyze --output json`, later the API).
type Problem struct {
	ID              string          `json:"id"`
	Kind            schema.Kind     `json:"kind"`
	Severity        schema.Severity `json:"severity"` // the worst of its findings
	CallerService   string          `json:"caller_service"`
	CallerOperation string          `json:"caller_operation"`
	CalleeService   string          `json:"callee_service"`
	CalleeOperation string          `json:"callee_operation"`
	// Path is the full path, for path-level kinds only.
	Path      string    `json:"path,omitempty"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Occurrences counts distinct finding ids.
	Occurrences int `json:"occurrences"`
	// AffectedRequests counts distinct trace ids; an edge finding, which has
	// no trace, adds its `samples` evidence (the calls it judged).
	AffectedRequests int `json:"affected_requests"`
	// Share is AffectedRequests over the requests of the paths the findings
	// lie on (at most 1); null when no request counts were given.
	Share      *float64 `json:"share"`
	Impact     Impact   `json:"impact"`
	Worst      Worst    `json:"worst"`
	Trend      []Bucket `json:"trend"`
	Examples   []string `json:"examples"` // trace ids: the worst, then the most recent
	State      State    `json:"state"`
	Suggestion string   `json:"suggestion"`
}

// Key returns the problem's fingerprint.
func (p *Problem) Key() Key {
	return Key{p.Kind, p.CallerService, p.CallerOperation, p.CalleeService, p.CalleeOperation, p.Path}
}

// Unit names what an Impact counts.
type Unit string

// The impact units, one per kind (docs/problems.md).
const (
	// UnitOrphanedSeconds is work done for callers that had stopped waiting
	// (orphaned_work) or for requests that arrived with no budget left
	// (expired_on_arrival).
	UnitOrphanedSeconds Unit = "orphaned_seconds"
	// UnitWastedCalls is calls that a retry made in vain: the calls beyond
	// the first (retry_amplification), attempts that could not finish in the
	// time left (retry_without_budget).
	UnitWastedCalls Unit = "wasted_calls"
	// UnitAffectedRequests is requests that met the misconfiguration.
	UnitAffectedRequests Unit = "affected_requests"
)

// Impact is what a problem costs, in a unit that depends on its kind.
type Impact struct {
	Value float64 `json:"value"`
	Unit  Unit    `json:"unit"`
}

// String writes the impact for a table: "3.2 s orphaned", "11 wasted calls".
func (i Impact) String() string {
	one := i.Value == 1
	switch {
	case i.Unit == UnitOrphanedSeconds:
		return fmtSeconds(i.Value) + " s orphaned"
	case i.Unit == UnitWastedCalls && one:
		return "1 wasted call"
	case i.Unit == UnitWastedCalls:
		return fmtCount(i.Value) + " wasted calls"
	case i.Unit == UnitAffectedRequests && one:
		return "1 request"
	case i.Unit == UnitAffectedRequests:
		return fmtCount(i.Value) + " requests"
	}
	return fmtCount(i.Value) + " " + string(i.Unit)
}

// Worst is the worst finding of a problem, by the kind's measure of badness.
type Worst struct {
	FindingID string             `json:"finding_id"`
	TraceID   string             `json:"trace_id"` // empty for an edge finding
	Evidence  map[string]float64 `json:"evidence"`
}

// Bucket counts the occurrences first detected in one interval.
type Bucket struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// State is where a problem is in its lifecycle.
type State string

// The states.
const (
	// StateActive: seen within the quiet period before now.
	StateActive State = "active"
	// StateResolved: not seen for longer than the quiet period.
	StateResolved State = "resolved"
	// StateRegressed: active again after an earlier silence longer than the
	// quiet period; it stays regressed until it goes quiet again.
	StateRegressed State = "regressed"
)

// Defaults for zero Options fields.
const (
	DefaultInterval    = time.Hour
	DefaultQuietPeriod = time.Hour
	DefaultMaxExamples = 5
)

// Options tune Group. Zero fields take the defaults above.
type Options struct {
	// Now is the time states are judged at; zero means the latest
	// detected_at among the findings, so Group never reads a clock.
	Now time.Time
	// Interval is the width of a trend bucket; buckets start at multiples
	// of it since the Unix epoch, so every replica cuts the same buckets.
	Interval time.Duration
	// QuietPeriod is how long a problem must go unseen to be resolved.
	QuietPeriod time.Duration
	// MaxExamples bounds Problem.Examples.
	MaxExamples int
	// PathRequests is the number of requests per path in the window
	// (analyze.PathSummary.Requests); nil leaves Problem.Share null.
	PathRequests map[string]uint64
	// Stats count the trace findings per problem and interval, kept or
	// not (StatsOf); the occurrences they cover are counted from them.
	// A problem with stats but no finding in the window is left out: it
	// has no evidence to show.
	Stats []Stat
}

func (o Options) withDefaults(fs []schema.Finding) Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.QuietPeriod <= 0 {
		o.QuietPeriod = DefaultQuietPeriod
	}
	if o.MaxExamples <= 0 {
		o.MaxExamples = DefaultMaxExamples
	}
	if o.Now.IsZero() {
		for i := range fs {
			if fs[i].DetectedAt.After(o.Now) {
				o.Now = fs[i].DetectedAt
			}
		}
	}
	return o
}

// occurrence is one distinct finding id: the copy to judge it by and when
// its copies were detected.
type occurrence struct {
	f           schema.Finding // the latest copy
	first, last time.Time
	seen        []time.Time // detected_at of every copy
}

// Group returns the problems of findings, sorted by impact (largest first),
// then severity (worst first), then id. The result depends only on the set
// of findings and opt, not on their order.
//
// A finding id written more than once (a re-analysed trace, an edge finding
// re-evaluated over a new window) is one occurrence: its earliest detected_at
// counts for first_seen and the trend, its latest for last_seen, and the
// latest copy (the one made with the most spans) is the one judged and
// fingerprinted. Every copy's detected_at counts as a sighting for the state.
func Group(findings []schema.Finding, opt Options) []Problem {
	opt = opt.withDefaults(findings)
	byID := map[string]*occurrence{}
	for i := range findings {
		f := &findings[i]
		id := occurrenceID(f)
		o := byID[id]
		if o == nil {
			byID[id] = &occurrence{f: *f, first: f.DetectedAt, last: f.DetectedAt, seen: []time.Time{f.DetectedAt}}
			continue
		}
		o.seen = append(o.seen, f.DetectedAt)
		if f.DetectedAt.Before(o.first) {
			o.first = f.DetectedAt
		}
		if f.DetectedAt.After(o.last) {
			o.last = f.DetectedAt
		}
		if newer(f, &o.f) {
			o.f = *f
		}
	}
	ids := slices.Sorted(maps.Keys(byID)) // aggregate in id order: float sums come out the same whatever the input order
	// Keyed by the Key itself: its ID is a hash of the same fields, made
	// once per problem (in build) rather than once per finding and stat.
	groups := map[Key][]*occurrence{}
	var keys []Key
	for _, id := range ids {
		o := byID[id]
		k := Fingerprint(o.f)
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], o)
	}
	statsOf := map[Key][]Stat{}
	for _, s := range opt.Stats {
		statsOf[s.Key] = append(statsOf[s.Key], s)
	}
	out := make([]Problem, 0, len(keys))
	for _, k := range keys {
		occ := groups[k]
		p := build(k, occ, opt)
		if st := statsOf[k]; len(st) > 0 {
			withStats(&p, occ, st, opt)
		}
		out = append(out, p)
	}
	SortByImpact(out)
	return out
}

// SortByImpact orders problems as Group returns them: impact (largest
// first), then severity (worst first), then id.
func SortByImpact(ps []Problem) {
	sort.Slice(ps, func(a, b int) bool {
		x, y := &ps[a], &ps[b]
		switch {
		case x.Impact.Value != y.Impact.Value:
			return x.Impact.Value > y.Impact.Value
		case x.Severity != y.Severity:
			return severityRank(x.Severity) > severityRank(y.Severity)
		}
		return x.ID < y.ID
	})
}

// occurrenceID identifies a finding. The analyzer always sets an id; a
// finding without one is identified by what the id would have hashed.
func occurrenceID(f *schema.Finding) string {
	if f.ID != "" {
		return f.ID
	}
	return "\x00" + string(f.Kind) + "\x00" + f.TraceID + "\x00" + f.SpanID + "\x00" + f.Path
}

// newer reports whether copy a of a finding replaces copy b: it was detected
// later, or at the same instant and is larger by an arbitrary but fixed
// order, so the choice does not depend on which copy came first.
func newer(a, b *schema.Finding) bool {
	if !a.DetectedAt.Equal(b.DetectedAt) {
		return a.DetectedAt.After(b.DetectedAt)
	}
	return copyOrder(a) > copyOrder(b)
}

func copyOrder(f *schema.Finding) string {
	var b strings.Builder
	for _, s := range []string{string(f.Severity), f.Path, f.Service, f.Operation, f.CallerService, f.CalleeService, f.Message} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	for _, k := range slices.Sorted(maps.Keys(f.Evidence)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.FormatFloat(f.Evidence[k], 'g', -1, 64))
		b.WriteByte(0)
	}
	return b.String()
}

// build makes the problem of key k from its occurrences, which are sorted
// by finding id.
func build(k Key, occ []*occurrence, opt Options) Problem {
	r := ruleOf(k.Kind)
	p := Problem{
		ID: k.ID(), Kind: k.Kind,
		CallerService: k.CallerService, CallerOperation: k.CallerOperation,
		CalleeService: k.CalleeService, CalleeOperation: k.CalleeOperation,
		Path:        k.Path,
		Occurrences: len(occ),
		FirstSeen:   occ[0].first, LastSeen: occ[0].last,
		Impact: Impact{Unit: r.unit},
	}
	traces := map[string]bool{}
	samples := 0.0
	impact := 0.0
	worst := occ[0]
	for _, o := range occ {
		if severityRank(o.f.Severity) > severityRank(p.Severity) {
			p.Severity = o.f.Severity
		}
		if o.first.Before(p.FirstSeen) {
			p.FirstSeen = o.first
		}
		if o.last.After(p.LastSeen) {
			p.LastSeen = o.last
		}
		if o.f.TraceID != "" {
			traces[o.f.TraceID] = true
		} else {
			samples += o.f.Evidence["samples"]
		}
		if r.perFinding != nil {
			impact += r.perFinding(o.f.Evidence)
		}
		if worse(r, o, worst) {
			worst = o
		}
	}
	p.AffectedRequests = len(traces) + int(math.Round(samples))
	if r.perFinding == nil {
		impact = float64(p.AffectedRequests)
	}
	p.Impact.Value = roundImpact(impact)
	p.Share = share(p.AffectedRequests, occ, opt.PathRequests)
	p.Worst = Worst{FindingID: worst.f.ID, TraceID: worst.f.TraceID, Evidence: copyEvidence(worst.f.Evidence)}
	p.Trend = trend(occ, opt.Interval)
	p.Examples = examples(occ, worst, opt.MaxExamples)
	p.State = state(occ, opt.Now, opt.QuietPeriod)
	fs := make([]schema.Finding, len(occ))
	for i, o := range occ {
		fs[i] = o.f
	}
	p.Suggestion = r.suggest(k, fs, &worst.f)
	return p
}

// roundImpact rounds to a thousandth (milliseconds of a second), leaving no
// float noise.
func roundImpact(v float64) float64 { return math.Round(v*1000) / 1000 }

// worse reports whether occurrence a is worse than b: a larger score of the
// kind, then a higher severity, then detected later, then the smaller id.
func worse(r rule, a, b *occurrence) bool {
	sa, sb := r.score(a.f.Evidence), r.score(b.f.Evidence)
	switch {
	case sa != sb:
		return sa > sb
	case a.f.Severity != b.f.Severity:
		return severityRank(a.f.Severity) > severityRank(b.f.Severity)
	case !a.last.Equal(b.last):
		return a.last.After(b.last)
	}
	return a.f.ID < b.f.ID
}

func severityRank(s schema.Severity) int {
	switch s {
	case schema.SeverityCritical:
		return 3
	case schema.SeverityWarning:
		return 2
	case schema.SeverityInfo:
		return 1
	}
	return 0
}

// share divides affected by the requests of the paths the occurrences lie
// on: a trace finding's own path, and for an edge finding (no trace) every
// path that ends with its edge, as analyze.Summarize counts them. Paths that
// both occur in one trace count that trace twice, so the share may be
// understated there; it is capped at 1 because an edge finding's samples are
// calls, retries included.
func share(affected int, occ []*occurrence, pathRequests map[string]uint64) *float64 {
	if pathRequests == nil {
		return nil
	}
	paths := map[string]bool{}
	for _, o := range occ {
		if o.f.TraceID != "" {
			paths[o.f.Path] = true
			continue
		}
		for p := range pathRequests {
			if p == o.f.Path || strings.HasSuffix(p, pathSep+o.f.Path) {
				paths[p] = true
			}
		}
	}
	var total uint64
	for p := range paths {
		total += pathRequests[p]
	}
	if total == 0 {
		return nil
	}
	s := min(float64(affected)/float64(total), 1)
	return &s
}

func copyEvidence(ev map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(ev))
	for k, v := range ev {
		out[k] = v
	}
	return out
}

// trend counts occurrences per interval of their first detection, in time
// order. Intervals without an occurrence are left out, so the list is
// bounded by the occurrences whatever the interval.
func trend(occ []*occurrence, interval time.Duration) []Bucket {
	counts := map[int64]int{}
	for _, o := range occ {
		counts[bucketStart(o.first, interval)]++
	}
	out := make([]Bucket, 0, len(counts))
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, Bucket{Start: time.Unix(0, s).UTC(), Count: counts[s]})
	}
	return out
}

// bucketStart returns the start of t's interval, in Unix nanoseconds, with
// intervals aligned to the Unix epoch (as ClickHouse's toStartOfInterval).
func bucketStart(t time.Time, interval time.Duration) int64 {
	ns, d := t.UnixNano(), int64(interval)
	m := ns % d
	if m < 0 {
		m += d
	}
	return ns - m
}

// examples returns up to n distinct trace ids: the worst occurrence's, then
// the most recently seen ones. Edge findings have no trace to show.
func examples(occ []*occurrence, worst *occurrence, n int) []string {
	recent := append([]*occurrence(nil), occ...)
	sort.SliceStable(recent, func(a, b int) bool {
		x, y := recent[a], recent[b]
		if !x.last.Equal(y.last) {
			return x.last.After(y.last)
		}
		return x.f.TraceID < y.f.TraceID
	})
	out := []string{}
	seen := map[string]bool{}
	for _, o := range append([]*occurrence{worst}, recent...) {
		if len(out) == n {
			break
		}
		if id := o.f.TraceID; id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// state judges the lifecycle from every sighting (the detected_at of every
// copy of every occurrence): resolved when the latest is more than quiet
// before now; regressed when it is not, but two consecutive sightings were
// once more than quiet apart (the problem had been resolved and came back);
// active otherwise.
func state(occ []*occurrence, now time.Time, quiet time.Duration) State {
	var seen []time.Time
	for _, o := range occ {
		seen = append(seen, o.seen...)
	}
	sort.Slice(seen, func(a, b int) bool { return seen[a].Before(seen[b]) })
	return stateOf(seen, now, quiet)
}

// stateOf judges the lifecycle from sightings in time order (see state).
func stateOf(seen []time.Time, now time.Time, quiet time.Duration) State {
	if now.Sub(seen[len(seen)-1]) > quiet {
		return StateResolved
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Sub(seen[i-1]) > quiet {
			return StateRegressed
		}
	}
	return StateActive
}
