package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
)

// ErrNotObserved marks a chain FromStore cannot build because the store has
// no data for it: the path was not seen in the window, or no budget was
// recorded at its root and none was given.
var ErrNotObserved = errors.New("not observed in the store")

// PathSep separates the elements of a call path, as the analyzer writes it.
const PathSep = " > "

// StoreQuery selects the call path FromStore observes.
type StoreQuery struct {
	// Path is the call path from the trace's root down, one
	// "service:operation" element per hop (ParsePath reads the written form).
	Path []string
	// Window bounds the hops' start times.
	Window store.Window
	// Budget is the client's budget; 0 takes the median budget recorded on
	// the root's entry spans.
	Budget time.Duration
}

// ParsePath splits "svc:op > svc:op > …" into its elements.
func ParsePath(s string) ([]string, error) {
	parts := strings.Split(s, PathSep)
	if len(parts) > MaxHops {
		return nil, fmt.Errorf("path has %d elements, more than %d", len(parts), MaxHops)
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, fmt.Errorf("path %q has an empty element %d: write it as \"svc:op > svc:op\"", s, i+1)
		}
	}
	return parts, nil
}

// Hops are entries (SERVER, CONSUMER and roots, as in store/chsql) or calls
// (CLIENT, PRODUCER); kinds are the OTLP numbers.
const (
	entryCond = "(kind IN (2, 5) OR parent_span_id = '')"
	callCond  = "kind IN (3, 4)"
	windowSQL = "start_ns >= {since:UInt64} AND start_ns <= {until:UInt64}"
)

// observed is what the hops table says about one path prefix: the entries
// of the hop it ends in and the calls into that hop.
type observed struct {
	entries            uint64
	entryP50, entryP99 float64
	budgetP50          *float64
	calls              uint64
	callP50, callP99   float64
	timeoutP50         *float64
	withMaxAttempts    uint64
	maxAttemptsP50     float64
	mostAttempt        uint32
	pairs              uint64  // CLIENT spans matched with their SERVER span
	transitP99         float64 // client minus server duration, over pairs
	ownTraces          uint64
	ownP99             float64 // entry duration minus the calls to the next hop
}

// FromStore builds the chain of q.Path from the hops budgetd stored: per hop
// the p99 of its own work (its entries' durations minus their calls to the
// next hop on the path, per trace) and of the transit on that call (the
// CLIENT span's duration minus its SERVER span's), the median per-attempt
// timeout and max_attempts its caller recorded, and the median latency of
// one attempt; the client's budget is the median budget recorded at the
// root unless q.Budget is set. The last hop's own work is its whole
// duration. Backoff is not stored, so it is taken as 0; Notes say so and
// name every other figure that was missing.
//
// All user input reaches the SQL as bound parameters; the only identifier
// is the store's own database name.
func FromStore(ctx context.Context, s *chsql.Store, q StoreQuery) (Chain, error) {
	n := len(q.Path)
	if n == 0 || n > MaxHops {
		return Chain{}, fmt.Errorf("build chain from store: path must have 1..%d elements", MaxHops)
	}
	prefixes := make([]string, n)
	for i := range q.Path {
		prefixes[i] = strings.Join(q.Path[:i+1], PathSep)
	}
	obs, err := observe(ctx, s, prefixes, q.Window)
	if err != nil {
		return Chain{}, fmt.Errorf("build chain from store: %w", err)
	}
	span := describeWindow(q.Window)
	root := obs[0]
	if root.entries == 0 {
		return Chain{}, fmt.Errorf("no request entered %q %s (paths start at the trace's root; `budgetd analyze` lists them): %w",
			q.Path[0], span, ErrNotObserved)
	}

	c := Chain{Budget: q.Budget}
	if c.Budget == 0 {
		if root.budgetP50 == nil || *root.budgetP50 <= 0 {
			return Chain{}, fmt.Errorf("no budget recorded on %q %s; give the client's budget: %w", q.Path[0], span, ErrNotObserved)
		}
		c.Budget = roundMs(*root.budgetP50)
		c.Notes = append(c.Notes, fmt.Sprintf("client budget: the median budget recorded on %s", q.Path[0]))
	}
	c.Notes = append(c.Notes, fmt.Sprintf("observed %d requests on %s %s; own work and transit are p99s, "+
		"timeouts, attempts and p50s medians of what the callers recorded", root.entries, q.Path[0], span))

	retried := false
	named := make(map[string]bool, n)
	for k, o := range obs {
		// A recursive path visits an element twice; hop names must differ.
		h := Hop{Name: q.Path[k]}
		if named[h.Name] {
			h.Name = fmt.Sprintf("%s (hop %d)", h.Name, k+1)
		}
		named[h.Name] = true
		last := k == n-1
		if !last && o.entries == 0 {
			return Chain{}, fmt.Errorf("no entry of %q %s on path %q: %w", q.Path[k], span, prefixes[k], ErrNotObserved)
		}
		if k > 0 {
			if o.calls == 0 && o.entries == 0 {
				return Chain{}, fmt.Errorf("no call reached %q %s on path %q: %w", q.Path[k], span, prefixes[k], ErrNotObserved)
			}
			if o.timeoutP50 != nil && *o.timeoutP50 > 0 {
				h.Timeout = roundMs(*o.timeoutP50)
			}
			switch {
			case o.withMaxAttempts > 0:
				h.Attempts = int(math.Round(o.maxAttemptsP50))
			case o.mostAttempt > 1:
				h.Attempts = int(o.mostAttempt)
				c.Notes = append(c.Notes, fmt.Sprintf("%s: no retry policy recorded; %d attempts were seen, so %d is assumed",
					h.Name, o.mostAttempt, o.mostAttempt))
			}
			h.Attempts = min(h.Attempts, MaxAttempts)
		}
		switch {
		case k > 0 && o.calls > 0:
			h.P50 = roundMs(o.callP50)
		case o.entries > 0:
			h.P50 = roundMs(o.entryP50)
		}
		switch {
		case !last:
			h.OwnWork = ceilMs(o.ownP99)
			next := obs[k+1]
			if next.pairs > 0 {
				h.Transit = ceilMs(next.transitP99)
			} else {
				c.Notes = append(c.Notes, fmt.Sprintf("%s: no call to %s was matched with its server span, so its transit is taken as 0",
					h.Name, q.Path[k+1]))
			}
		case o.entries > 0:
			h.OwnWork = ceilMs(o.entryP99)
		default:
			// A callee that records no span of its own (a database, a
			// cache) is known only from its callers' side.
			h.OwnWork = ceilMs(o.callP99)
			c.Notes = append(c.Notes, fmt.Sprintf("%s records no entry spans: its own work is its callers' p99 call duration", h.Name))
		}
		retried = retried || h.Attempts > 1
		c.Hops = append(c.Hops, h)
	}
	if retried {
		c.Notes = append(c.Notes, "backoff between attempts is not stored, so 0 ms is assumed: with real backoff each attempt gets less than shown")
	}
	if err := c.Validate(); err != nil {
		return Chain{}, fmt.Errorf("build chain from store: %w", err)
	}
	return c, nil
}

// observe runs the three aggregate queries: per-prefix figures, transit per
// call, and own work per hop.
func observe(ctx context.Context, s *chsql.Store, prefixes []string, w store.Window) ([]observed, error) {
	db := s.Database()
	obs := make([]observed, len(prefixes))
	index := make(map[string]int, len(prefixes))
	params := chsql.Params{chsql.P("since", w.SinceNs), chsql.P("until", w.Until())}
	var in []string
	for i, p := range prefixes {
		index[p] = i
		name := "p" + strconv.Itoa(i)
		params = append(params, chsql.P(name, p))
		in = append(in, "{"+name+":String}")
	}
	inList := strings.Join(in, ", ")
	dur := "duration_ns / 1000000"

	q := "SELECT path, countIf(" + entryCond + ")," +
		" quantileIf(0.5)(" + dur + ", " + entryCond + "), quantileIf(0.99)(" + dur + ", " + entryCond + ")," +
		" quantileIf(0.5)(budget_ms, " + entryCond + ")," +
		" countIf(" + callCond + "), quantileIf(0.5)(" + dur + ", " + callCond + "), quantileIf(0.99)(" + dur + ", " + callCond + ")," +
		" quantileIf(0.5)(timeout_ms, " + callCond + ")," +
		" countIf(" + callCond + " AND max_attempts > 0), quantileIf(0.5)(toFloat64(max_attempts), " + callCond + " AND max_attempts > 0)," +
		" maxIf(attempt, " + callCond + ")" +
		" FROM " + db + ".hops WHERE path IN (" + inList + ") AND " + windowSQL + " GROUP BY path"
	err := eachRow(ctx, s, q, params, func(r chsql.Rows) error {
		var path string
		var o observed
		if err := r.Scan(&path, &o.entries, &o.entryP50, &o.entryP99, &o.budgetP50,
			&o.calls, &o.callP50, &o.callP99, &o.timeoutP50,
			&o.withMaxAttempts, &o.maxAttemptsP50, &o.mostAttempt); err != nil {
			return err
		}
		if i, ok := index[path]; ok {
			obs[i] = o
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read hops per path: %w", err)
	}

	// A SERVER span's parent is the CLIENT span that called it, so grouping
	// a call by its own span id and an entry by its parent's pairs them
	// without a join.
	if len(prefixes) > 1 {
		q = "SELECT path, count(), quantile(0.99)(t) FROM (" +
			"SELECT path, (sumIf(toInt64(duration_ns), " + callCond + ") - sumIf(toInt64(duration_ns), kind IN (2, 5))) / 1000000 AS t" +
			" FROM " + db + ".hops WHERE path IN (" + inList + ") AND " + windowSQL + " AND (" + callCond + " OR kind IN (2, 5))" +
			" GROUP BY trace_id, path, if(" + callCond + ", span_id, parent_span_id)" +
			" HAVING countIf(" + callCond + ") = 1 AND countIf(kind IN (2, 5)) = 1" +
			") GROUP BY path"
		err = eachRow(ctx, s, q, params, func(r chsql.Rows) error {
			var path string
			var pairs uint64
			var p99 float64
			if err := r.Scan(&path, &pairs, &p99); err != nil {
				return err
			}
			if i, ok := index[path]; ok {
				obs[i].pairs, obs[i].transitP99 = pairs, max(p99, 0)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read transit per call: %w", err)
		}
	}

	// Own work is measured per trace rather than per entry span: a hop's
	// calls may hang below internal spans, but they always share its trace.
	// A hop entered several times in one trace (its caller retried) counts
	// the average of those entries.
	for k := 0; k+1 < len(prefixes); k++ {
		cur, next := "{p"+strconv.Itoa(k)+":String}", "{p"+strconv.Itoa(k+1)+":String}"
		isCur := "path = " + cur + " AND " + entryCond
		q = "SELECT count(), quantile(0.99)(own) FROM (" +
			"SELECT greatest(sumIf(toInt64(duration_ns), " + isCur + ") - sumIf(toInt64(duration_ns), path = " + next + " AND " + callCond + "), toInt64(0))" +
			" / countIf(" + isCur + ") / 1000000 AS own" +
			" FROM " + db + ".hops WHERE path IN (" + cur + ", " + next + ") AND " + windowSQL +
			" GROUP BY trace_id HAVING countIf(" + isCur + ") > 0)"
		err = eachRow(ctx, s, q, params, func(r chsql.Rows) error {
			return r.Scan(&obs[k].ownTraces, &obs[k].ownP99)
		})
		if err != nil {
			return nil, fmt.Errorf("read own work of %s: %w", prefixes[k], err)
		}
	}
	return obs, nil
}

func eachRow(ctx context.Context, s *chsql.Store, query string, params chsql.Params, fn func(chsql.Rows) error) error {
	rows, err := s.Conn().Query(ctx, query, params)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// describeWindow prints a window for messages: "between A and B".
func describeWindow(w store.Window) string {
	at := func(ns uint64) string { return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339) }
	if w.UntilNs == 0 {
		return "since " + at(w.SinceNs)
	}
	return "between " + at(w.SinceNs) + " and " + at(w.UntilNs)
}

// roundMs turns an observed median into whole milliseconds; NaN (no
// samples) becomes 0.
func roundMs(v float64) time.Duration {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	return time.Duration(math.Round(v)) * time.Millisecond
}

// ceilMs rounds an allowance up, so the plan never budgets less than was
// observed.
func ceilMs(v float64) time.Duration {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(v)) * time.Millisecond
}
