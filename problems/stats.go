package problems

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// Stat counts the trace findings of one problem in one interval. The
// findings table keeps full detail for at most
// problems.examples_per_interval findings per problem and interval (the
// examples); stats count every one, so a problem's occurrences, affected
// requests, impact and trend do not depend on how many were kept.
type Stat struct {
	Key Key
	// Interval is the start of the interval, aligned to the Unix epoch like
	// the trend's buckets.
	Interval time.Time
	Findings uint64  // distinct finding ids
	Requests uint64  // distinct traces
	Impact   float64 // the kind's per-finding impact, summed; 0 for kinds that count requests
}

// StatsOf counts findings per problem and interval of their detection. Only
// trace findings are counted: an edge finding (no trace) is one per edge
// and is always kept whole. Each finding id counts once.
func StatsOf(findings []schema.Finding, interval time.Duration) []Stat {
	// Grouped by the fingerprint itself: its hash (Key.ID) is left to
	// whoever needs it, once per stat, not per finding.
	type key struct {
		k     Key
		start int64
	}
	type acc struct {
		stat   Stat
		ids    map[string]bool
		traces map[string]bool
	}
	accs := map[key]*acc{}
	for i := range findings {
		f := &findings[i]
		if f.TraceID == "" {
			continue
		}
		k := Fingerprint(*f)
		start := bucketStart(f.DetectedAt, interval)
		a := accs[key{k, start}]
		if a == nil {
			a = &acc{stat: Stat{Key: k, Interval: time.Unix(0, start).UTC()}, ids: map[string]bool{}, traces: map[string]bool{}}
			accs[key{k, start}] = a
		}
		id := occurrenceID(f)
		if a.ids[id] {
			continue
		}
		a.ids[id] = true
		a.traces[f.TraceID] = true
		if r := ruleOf(f.Kind); r.perFinding != nil {
			a.stat.Impact += r.perFinding(f.Evidence)
		}
	}
	out := make([]Stat, 0, len(accs))
	for _, a := range accs {
		a.stat.Findings, a.stat.Requests = uint64(len(a.ids)), uint64(len(a.traces))
		out = append(out, a.stat)
	}
	// A fixed order, so one batch always renders the same rows.
	slices.SortFunc(out, func(a, b Stat) int {
		if c := a.Key.compare(b.Key); c != 0 {
			return c
		}
		return a.Interval.Compare(b.Interval)
	})
	return out
}

// compare orders keys field by field.
func (k Key) compare(o Key) int {
	for _, c := range [][2]string{
		{string(k.Kind), string(o.Kind)}, {k.CallerService, o.CallerService}, {k.CallerOperation, o.CallerOperation},
		{k.CalleeService, o.CalleeService}, {k.CalleeOperation, o.CalleeOperation}, {k.Path, o.Path},
	} {
		if r := strings.Compare(c[0], c[1]); r != 0 {
			return r
		}
	}
	return 0
}

// withStats replaces p's counts with the stats of its problem (sorted by
// interval) where they cover the occurrences: an occurrence detected in an
// interval with a stat is counted there; one in an interval without (a
// finding stored before stats were kept) is counted from the finding, as
// without stats.
func withStats(p *Problem, occ []*occurrence, stats []Stat, opt Options) {
	r := ruleOf(p.Kind)
	covered := map[int64]bool{}
	for _, s := range stats {
		covered[s.Interval.UnixNano()] = true
	}
	var findings, requests uint64
	impact := 0.0
	counts := map[int64]int{}
	for _, s := range stats {
		findings += s.Findings
		requests += s.Requests
		impact += s.Impact
		counts[s.Interval.UnixNano()] += int(s.Findings)
		if s.Interval.Before(p.FirstSeen) {
			p.FirstSeen = s.Interval
		}
		if s.Interval.After(p.LastSeen) {
			p.LastSeen = s.Interval
		}
	}
	traces := map[string]bool{}
	for _, o := range occ {
		start := bucketStart(o.first, opt.Interval)
		if covered[start] {
			continue
		}
		findings++
		counts[start]++
		if !traces[o.f.TraceID] {
			traces[o.f.TraceID] = true
			requests++
		}
		if r.perFinding != nil {
			impact += r.perFinding(o.f.Evidence)
		}
	}
	p.Occurrences = int(findings)
	p.AffectedRequests = int(requests)
	if r.perFinding == nil {
		impact = float64(requests)
	}
	p.Impact.Value = roundImpact(impact)
	p.Share = share(p.AffectedRequests, occ, opt.PathRequests)
	p.Trend = p.Trend[:0]
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		p.Trend = append(p.Trend, Bucket{Start: time.Unix(0, s).UTC(), Count: counts[s]})
	}
}

// FromStats builds the problems of stats alone, without their findings: the
// counts, impact, trend, first and last seen, and state, as Group would
// judge them with every finding at its interval. It is what watching needs
// (budgetd's metrics and notifications), at the cost of reading one row per
// problem and interval instead of every finding: severity, worst, examples,
// share and suggestion are left empty. A problem was last seen when its
// last interval ended (or now, if that is sooner), so states are judged to
// within one interval (statsState).
func FromStats(stats []Stat, opt Options) []Problem {
	opt = opt.withDefaults(nil)
	byID := map[string][]Stat{}
	var ids []string
	for _, s := range stats {
		id := s.Key.ID()
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], s)
	}
	if opt.Now.IsZero() {
		for _, s := range stats {
			if end := s.Interval.Add(opt.Interval); end.After(opt.Now) {
				opt.Now = end
			}
		}
	}
	out := make([]Problem, 0, len(ids))
	for _, id := range ids {
		st := byID[id]
		slices.SortFunc(st, func(a, b Stat) int { return a.Interval.Compare(b.Interval) })
		k := st[0].Key
		p := Problem{
			ID: id, Kind: k.Kind, CallerService: k.CallerService, CallerOperation: k.CallerOperation,
			CalleeService: k.CalleeService, CalleeOperation: k.CalleeOperation, Path: k.Path,
			FirstSeen: st[0].Interval, Impact: Impact{Unit: ruleOf(k.Kind).unit},
			Trend: []Bucket{}, Examples: []string{},
		}
		var requests uint64
		impact := 0.0
		for _, s := range st {
			p.Occurrences += int(s.Findings)
			requests += s.Requests
			impact += s.Impact
			p.Trend = append(p.Trend, Bucket{Start: s.Interval, Count: int(s.Findings)})
		}
		p.AffectedRequests = int(requests)
		if ruleOf(k.Kind).perFinding == nil {
			impact = float64(requests)
		}
		p.Impact.Value = roundImpact(impact)
		last := st[len(st)-1].Interval.Add(opt.Interval)
		if last.After(opt.Now) {
			last = opt.Now
		}
		p.LastSeen = last
		p.State = statsState(st, last, opt)
		out = append(out, p)
	}
	SortByImpact(out)
	return out
}

// statsState judges the lifecycle of a problem from its intervals, in time
// order, last seen at last: resolved when last is more than the quiet
// period before now; regressed when two of its intervals lie more than the
// quiet period apart even if its findings came at the end of the earlier
// one and the start of the later one (the least the silence can have
// been); active otherwise.
func statsState(st []Stat, last time.Time, opt Options) State {
	if opt.Now.Sub(last) > opt.QuietPeriod {
		return StateResolved
	}
	for i := 1; i < len(st); i++ {
		if st[i].Interval.Sub(st[i-1].Interval.Add(opt.Interval)) > opt.QuietPeriod {
			return StateRegressed
		}
	}
	return StateActive
}
