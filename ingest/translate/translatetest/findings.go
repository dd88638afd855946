package translatetest

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
)

// RequireSameFindings fails t unless got holds the findings and paths of
// want: the same kinds, severities, trace and span ids, services,
// operations, paths and messages, and evidence equal to nine significant
// digits. With foldCase, names and messages compare without case, and the
// ids of edge findings (hashes of the edge's names) are not compared: for
// Zipkin, whose producers lower-case span and service names.
func RequireSameFindings(t testing.TB, want, got analyze.Report, foldCase bool) {
	t.Helper()
	w, g := normalize(want, foldCase), normalize(got, foldCase)
	require.Equal(t, w.Findings, g.Findings, "findings")
	require.Equal(t, w.Paths, g.Paths, "paths")
}

func normalize(r analyze.Report, foldCase bool) analyze.Report {
	fold := func(s string) string {
		if foldCase {
			return strings.ToLower(s)
		}
		return s
	}
	out := analyze.Report{Findings: make([]schema.Finding, len(r.Findings)), Paths: make([]analyze.PathSummary, len(r.Paths))}
	for i, f := range r.Findings {
		f.Service, f.Operation, f.CallerService, f.CalleeService = fold(f.Service), fold(f.Operation), fold(f.CallerService), fold(f.CalleeService)
		f.Path, f.Message = fold(f.Path), fold(f.Message)
		if foldCase && f.SpanID == "" {
			f.ID = ""
		}
		ev := make(map[string]float64, len(f.Evidence))
		for k, v := range f.Evidence {
			ev[k], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 9, 64), 64)
		}
		f.Evidence = ev
		out.Findings[i] = f
	}
	sort.SliceStable(out.Findings, func(i, j int) bool {
		a, b := &out.Findings[i], &out.Findings[j]
		for _, c := range [][2]string{{string(a.Kind), string(b.Kind)}, {a.TraceID, b.TraceID}, {a.SpanID, b.SpanID},
			{a.CallerService + a.Operation, b.CallerService + b.Operation}, {a.CalleeService, b.CalleeService}, {a.Message, b.Message}} {
			if c[0] != c[1] {
				return c[0] < c[1]
			}
		}
		return false
	})
	for i, p := range r.Paths {
		p.Path = fold(p.Path)
		out.Paths[i] = p
	}
	sort.SliceStable(out.Paths, func(i, j int) bool { return out.Paths[i].Path < out.Paths[j].Path })
	return out
}
