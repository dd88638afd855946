package api

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/budgetd/budgetd/store"
)

// storeContext derives the store deadline from the request: the request's
// own context (so a disconnect cancels the query), bounded by the timeout
// parameter or the default, never beyond api.max_timeout.
func (s *Server) storeContext(c *gin.Context) (context.Context, context.CancelFunc, error) {
	timeout := s.cfg.DefaultTimeout
	if v := c.Query("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, badParam("timeout", "want a positive duration such as 5s, got %q", v)
		}
		timeout = min(d, s.cfg.MaxTimeout)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), timeout)
	return ctx, cancel, nil
}

// window reads since/until: RFC 3339 times or durations before now. since
// defaults to api.default_window before now, until to now. A bound relative
// to now (a duration, or the default) is widened to a whole minute
// (store.WholeIntervals): the aggregates of a window of whole minutes are
// read from per-minute statistics alone. An RFC 3339 bound is exact.
func (s *Server) window(c *gin.Context) (store.Window, error) {
	now := s.now()
	parse := func(name string, def time.Time) (t time.Time, relative bool, err error) {
		v := c.Query(name)
		if v == "" {
			return def, true, nil
		}
		t, err = time.Parse(time.RFC3339Nano, v)
		if err != nil {
			d, derr := time.ParseDuration(v)
			if derr != nil || d < 0 {
				return time.Time{}, false, badParam(name, "want an RFC 3339 time or a duration before now such as 1h, got %q", v)
			}
			t, relative = now.Add(-d), true
		}
		// Stored times are Unix nanoseconds in a UInt64 that Go's time
		// arithmetic reads as an int64: outside this range a bound would
		// wrap around and select the wrong rows instead of none.
		if t.Before(earliestTime) || t.After(latestTime) {
			return time.Time{}, false, badParam(name, "%q is outside the times budgetd stores (%s to %s)", v,
				earliestTime.Format(time.RFC3339), latestTime.Format(time.RFC3339))
		}
		return t, relative, nil
	}
	since, sinceRelative, err := parse("since", now.Add(-s.cfg.DefaultWindow))
	if err != nil {
		return store.Window{}, err
	}
	until, untilRelative, err := parse("until", now)
	if err != nil {
		return store.Window{}, err
	}
	if until.Before(since) {
		return store.Window{}, badParam("until", "is before since")
	}
	whole := store.WholeIntervals(since, until)
	w := store.WindowOf(since, until)
	if sinceRelative {
		w.SinceNs = whole.SinceNs
	}
	if untilRelative {
		w.UntilNs = whole.UntilNs
	}
	return w, nil
}

// The range of times a window may name: the Unix epoch to the last
// nanosecond an int64 holds (2262-04-11).
var (
	earliestTime = time.Unix(0, 0).UTC()
	latestTime   = time.Unix(0, math.MaxInt64).UTC()
)

// limit reads the limit parameter: 1..most, def when absent.
func limit(c *gin.Context, def, most int) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, badParam("limit", "want a whole number from 1 to %d, got %q", most, v)
	}
	return n, nil
}

// knownParams rejects parameters a route does not take, so a misspelt
// filter is an error rather than a silently unfiltered answer.
func knownParams(c *gin.Context, names ...string) error {
	for k := range c.Request.URL.Query() {
		ok := k == "timeout"
		for _, n := range names {
			ok = ok || k == n
		}
		if !ok {
			return badParam(k, "not a parameter of this endpoint")
		}
	}
	return nil
}
