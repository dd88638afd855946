package groundtruth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/budgetd/budgetd/schema"
)

// Score counts one kind's findings against the truth.
type Score struct {
	Kind       schema.Kind
	TP, FP, FN int
}

// Recall is TP / (TP + FN), or 1 when nothing was expected.
func (s Score) Recall() float64 {
	if s.TP+s.FN == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FN)
}

// callKinds are the kinds reported on a call span (or, for
// latency_inversion, on an edge), whose key includes the callee.
var callKinds = map[schema.Kind]bool{
	schema.KindTimeoutInversion:    true,
	schema.KindUnfundedRetryPolicy: true,
	schema.KindRetryWithoutBudget:  true,
	schema.KindRetryAmplification:  true,
	schema.KindLatencyInversion:    true,
}

// Key is the scoring key of a finding of kind on service's span of trace,
// calling callee: several findings with one key count once. service is the
// finding's service (the caller, for a call kind).
func Key(kind schema.Kind, trace, service, callee string) Expect {
	e := Expect{Kind: kind, TraceID: trace, Service: service}
	if callKinds[kind] {
		e.Callee = callee
	}
	if kind == schema.KindLatencyInversion {
		e.TraceID = ""
	}
	return e
}

// FindingKey is Key of a finding.
func FindingKey(f *schema.Finding) Expect {
	return Key(f.Kind, f.TraceID, f.Service, f.CalleeService)
}

// ScoreKeys scores the keys of the findings budgetd reported against truth,
// one Score per kind of schema.Kinds. A key that matches an Ambiguous case
// is not counted.
func ScoreKeys(found []Expect, truth Truth) []Score {
	expected := set(truth.Expected)
	ambiguous := set(truth.Ambiguous)
	got := set(found)
	byKind := map[schema.Kind]*Score{}
	for _, k := range schema.Kinds {
		byKind[k] = &Score{Kind: k}
	}
	get := func(k schema.Kind) *Score {
		s := byKind[k]
		if s == nil {
			s = &Score{Kind: k}
			byKind[k] = s
		}
		return s
	}
	for k := range got {
		switch {
		case expected[k]:
			get(k.Kind).TP++
		case !ambiguous[k]:
			get(k.Kind).FP++
		}
	}
	for k := range expected {
		if !got[k] {
			get(k.Kind).FN++
		}
	}
	out := make([]Score, 0, len(byKind))
	for _, s := range byKind {
		out = append(out, *s)
	}
	sort.Slice(out, func(a, b int) bool { return kindOrder(out[a].Kind) < kindOrder(out[b].Kind) })
	return out
}

// False returns the keys found that match neither an expected nor an
// ambiguous case, each once, in the order found.
func False(found []Expect, truth Truth) []Expect {
	ok := set(truth.Expected)
	for k := range set(truth.Ambiguous) {
		ok[k] = true
	}
	var out []Expect
	for _, k := range found {
		if !ok[k] {
			ok[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Missed returns up to limit expected cases per kind that no key matched.
func Missed(found []Expect, truth Truth, limit int) []Expect {
	got := set(found)
	n := map[schema.Kind]int{}
	var out []Expect
	for _, e := range truth.Expected {
		if !got[e] {
			if n[e.Kind]++; n[e.Kind] <= limit {
				out = append(out, e)
			}
		}
	}
	return out
}

func set(es []Expect) map[Expect]bool {
	m := make(map[Expect]bool, len(es))
	for _, e := range es {
		m[e] = true
	}
	return m
}

func kindOrder(k schema.Kind) int {
	for i, v := range schema.Kinds {
		if v == k {
			return i
		}
	}
	return len(schema.Kinds)
}

// Row is one line of a precision/recall table: one kind's score in one run
// (a Score with no Kind stands for a run that expected and found nothing).
type Row struct {
	Scenario, Mode string
	Score          Score
}

// Rows turns a run's scores into table rows: one per kind that was
// expected or found, or one empty row when none was.
func Rows(scenario, mode string, scores []Score) []Row {
	var out []Row
	for _, s := range scores {
		if s.TP+s.FP+s.FN > 0 {
			out = append(out, Row{scenario, mode, s})
		}
	}
	if len(out) == 0 {
		out = append(out, Row{Scenario: scenario, Mode: mode})
	}
	return out
}

// Table renders rows as the Markdown table of docs/experiments.md.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| scenario | budget attributes | kind | TP | FP | FN | precision | recall |\n|---|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		s := r.Score
		if s.Kind == "" {
			fmt.Fprintf(&b, "| %s | %s | (no finding expected, none reported) | 0 | 0 | 0 | — | — |\n", r.Scenario, r.Mode)
			continue
		}
		prec := "—"
		if s.TP+s.FP > 0 {
			prec = fmt.Sprintf("%.0f %%", 100*float64(s.TP)/float64(s.TP+s.FP))
		}
		rec := "—"
		if s.TP+s.FN > 0 {
			rec = fmt.Sprintf("%.0f %%", 100*s.Recall())
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %d | %d | %d | %s | %s |\n", r.Scenario, r.Mode, s.Kind, s.TP, s.FP, s.FN, prec, rec)
	}
	return b.String()
}

// Summary is a short text table of scores, for test logs.
func Summary(scores []Score) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %4s %4s %4s\n", "kind", "TP", "FP", "FN")
	for _, s := range scores {
		if s.TP+s.FP+s.FN > 0 {
			fmt.Fprintf(&b, "%-24s %4d %4d %4d\n", s.Kind, s.TP, s.FP, s.FN)
		}
	}
	return b.String()
}
