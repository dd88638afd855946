package store

import (
	"context"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// ReadFindings pages through the findings q selects, newest first, and
// returns at most max of them; truncated says there were more.
func ReadFindings(ctx context.Context, st Store, q FindingQuery, max int) (_ []schema.Finding, truncated bool, _ error) {
	var out []schema.Finding
	q.Limit, q.Cursor = MaxPageSize, ""
	for {
		page, err := st.Findings(ctx, q)
		if err != nil {
			return nil, false, err
		}
		if room := max - len(out); len(page.Findings) > room {
			return append(out, page.Findings[:room]...), true, nil
		}
		out = append(out, page.Findings...)
		if page.Next == "" {
			return out, false, nil
		}
		q.Cursor = page.Next
	}
}

// FromIntervalStart returns w starting at the start of the interval of
// width d (aligned to the Unix epoch) that holds its start: the stats of
// that interval count findings of w too.
func FromIntervalStart(w Window, d time.Duration) Window {
	if d > 0 {
		w.SinceNs -= w.SinceNs % uint64(d)
	}
	return w
}
