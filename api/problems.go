package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// Problems are grouped from the findings detected in the window when they
// are asked for (package problems): the findings table is the one record,
// so the answer is the same after a restart, on every replica and on both
// engines, and a finding written again (a re-analysed trace, an edge
// evaluated again) counts once, by its id. Reading the findings is bounded
// by problems.max_findings; an answer that reached the bound says so.

// problemsResponse is the answer of GET /problems.
type problemsResponse struct {
	Window   windowJSON         `json:"window"`
	Problems []problems.Problem `json:"problems"`
	Next     string             `json:"next"`
	// Truncated says the window held more findings than
	// problems.max_findings: the problems are of the newest ones.
	Truncated bool `json:"truncated"`
}

// problemResponse is the answer of GET /problems/{id}.
type problemResponse struct {
	Window  windowJSON       `json:"window"`
	Problem problems.Problem `json:"problem"`
	// Paths are the call paths the problem's findings lie on.
	Paths []string `json:"paths"`
	// Findings are the findings of the problem's example traces.
	Findings  []schema.Finding `json:"findings"`
	Truncated bool             `json:"truncated"`
}

// problemSorts are the orders GET /problems offers.
var problemSorts = map[string]func(a, b *problems.Problem) bool{
	"impact": nil, // Group's own order
	"last_seen": func(a, b *problems.Problem) bool {
		if !a.LastSeen.Equal(b.LastSeen) {
			return a.LastSeen.After(b.LastSeen)
		}
		return a.ID < b.ID
	},
	"occurrences": func(a, b *problems.Problem) bool {
		if a.Occurrences != b.Occurrences {
			return a.Occurrences > b.Occurrences
		}
		return a.ID < b.ID
	},
}

func (s *Server) problems(c *gin.Context) {
	if err := knownParams(c, "service", "kind", "state", "since", "until", "sort", "limit", "next"); err != nil {
		s.writeError(c, err)
		return
	}
	kind := schema.Kind(c.Query("kind"))
	if kind != "" && !schema.ValidKind(kind) {
		s.writeError(c, badParam("kind", "unknown kind %q", kind))
		return
	}
	state := problems.State(c.Query("state"))
	switch state {
	case "", problems.StateActive, problems.StateResolved, problems.StateRegressed:
	default:
		s.writeError(c, badParam("state", "want active, resolved or regressed, got %q", state))
		return
	}
	order := c.DefaultQuery("sort", "impact")
	less, ok := problemSorts[order]
	if !ok {
		s.writeError(c, badParam("sort", "want impact, last_seen or occurrences, got %q", order))
		return
	}
	n, err := limit(c, store.DefaultPageSize, store.MaxPageSize)
	if err != nil {
		s.writeError(c, err)
		return
	}
	offset := 0
	if v := c.Query("next"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			s.writeError(c, badParam("next", "not a cursor from a previous page"))
			return
		}
	}
	w, ctx, cancel, ok := s.windowContext(c)
	if !ok {
		return
	}
	defer cancel()
	in, err := s.readProblemInputs(ctx, w, kind)
	if err != nil {
		s.writeError(c, err)
		return
	}
	truncated := in.truncated
	all := s.groupProblems(in, "")
	service := c.Query("service")
	kept := all[:0]
	for _, p := range all {
		if (service == "" || p.CallerService == service || p.CalleeService == service) && (state == "" || p.State == state) {
			kept = append(kept, p)
		}
	}
	if less != nil {
		sort.SliceStable(kept, func(a, b int) bool { return less(&kept[a], &kept[b]) })
	}
	out := problemsResponse{Window: windowOf(w), Problems: []problems.Problem{}, Truncated: truncated}
	if offset < len(kept) {
		end := min(offset+n, len(kept))
		out.Problems = kept[offset:end]
		if end < len(kept) {
			out.Next = strconv.Itoa(end)
		}
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) problem(c *gin.Context) {
	if err := knownParams(c, "since", "until"); err != nil {
		s.writeError(c, err)
		return
	}
	id := c.Param("id")
	w, ctx, cancel, ok := s.windowContext(c)
	if !ok {
		return
	}
	defer cancel()
	in, err := s.readProblemInputs(ctx, w, "")
	if err != nil {
		s.writeError(c, err)
		return
	}
	truncated := in.truncated
	var mine []schema.Finding
	for _, f := range in.findings {
		if problems.Fingerprint(f).ID() == id {
			mine = append(mine, f)
		}
	}
	in.findings = mine
	all := s.groupProblems(in, id)
	if len(all) != 1 {
		s.writeError(c, fmt.Errorf("no problem %q in this window: %w", id, store.ErrNotFound))
		return
	}
	p := all[0]
	out := problemResponse{Window: windowOf(w), Problem: p, Paths: []string{}, Findings: []schema.Finding{}, Truncated: truncated}
	examples := map[string]bool{}
	for _, t := range p.Examples {
		examples[t] = true
	}
	paths := map[string]bool{}
	seen := map[string]bool{}
	for _, f := range mine {
		if !paths[f.Path] {
			paths[f.Path] = true
			out.Paths = append(out.Paths, f.Path)
		}
		if (examples[f.TraceID] || f.ID == p.Worst.FindingID) && !seen[f.ID] {
			seen[f.ID] = true
			out.Findings = append(out.Findings, f)
		}
	}
	sort.Strings(out.Paths)
	c.JSON(http.StatusOK, out)
}

// problemInputs is what grouping a window's problems reads: the findings
// detected in it (of one kind, when set), newest first, up to
// problems.max_findings; each path's requests in it, for a problem's
// share; and the problem stats of the trend intervals it touches.
type problemInputs struct {
	findings  []schema.Finding
	truncated bool // the findings reached problems.max_findings
	requests  map[string]uint64
	stats     []problems.Stat
}

// readProblemInputs makes the three reads at once: none depends on
// another, so the answer waits for the slowest instead of their sum (on
// the embedded engine too, which has three reads sessions). The first
// failure in the order above is the answer's error.
func (s *Server) readProblemInputs(ctx context.Context, w store.Window, kind schema.Kind) (problemInputs, error) {
	var in problemInputs
	var errFindings, errRequests, errStats error
	var wg sync.WaitGroup
	wg.Go(func() {
		in.findings, in.truncated, errFindings = s.store.WindowFindings(ctx,
			store.FindingQuery{Kind: kind, Window: w}, s.problemsCfg.MaxFindings)
	})
	wg.Go(func() { in.requests, errRequests = s.store.PathRequests(ctx, w, s.cfg.MaxRows) })
	wg.Go(func() {
		in.stats, errStats = s.store.ProblemStats(ctx, store.FromIntervalStart(w, s.problemsCfg.TrendInterval))
	})
	wg.Wait()
	for _, err := range []error{errFindings, errRequests, errStats} {
		if err != nil {
			return problemInputs{}, err
		}
	}
	return in, nil
}

// groupProblems groups in's findings into problems, with the counts of its
// problem stats (only problem's, when it is set) and each path's requests
// for their share.
func (s *Server) groupProblems(in problemInputs, problem string) []problems.Problem {
	stats := in.stats
	if problem != "" {
		mine := stats[:0]
		for _, st := range stats {
			if st.Key.ID() == problem {
				mine = append(mine, st)
			}
		}
		stats = mine
	}
	return problems.Group(in.findings, s.problemsCfg.Options(s.now(), in.requests, stats))
}
