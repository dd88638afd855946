package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Format is an output format for a Plan.
type Format string

// The output formats.
const (
	FormatTable    Format = "table"
	FormatJSON     Format = "json"
	FormatMarkdown Format = "markdown"
)

// ParseFormat checks a format name given by a user.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatTable, FormatJSON, FormatMarkdown:
		return f, nil
	}
	return "", fmt.Errorf("output format must be table, json or markdown, not %q", s)
}

// Write prints p in format f. All figures are whole or fractional
// milliseconds, so outputs of the same plan agree to the digit.
func Write(w io.Writer, p Plan, f Format) error {
	switch f {
	case FormatJSON:
		return writeJSON(w, p)
	case FormatMarkdown:
		return writeMarkdown(w, p)
	case FormatTable:
		return writeTable(w, p)
	}
	return fmt.Errorf("write plan: unknown format %q", f)
}

// fmtMs formats a duration as milliseconds: "1920 ms", "0.5 ms".
func fmtMs(d time.Duration) string { return num(ms(d)) + " ms" }

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// columns are the plan table's columns; TIMEOUT and P50 only appear when a
// hop has one, so the common case stays narrow.
type columns struct{ timeout, p50 bool }

func columnsOf(rows []Row) columns {
	var c columns
	for _, r := range rows {
		c.timeout = c.timeout || r.Timeout > 0
		c.p50 = c.p50 || r.P50 > 0
	}
	return c
}

func (c columns) header() []string {
	h := []string{"Hop", "Budget on entry", "Per attempt", "Own work", "Transit + slack", "Passed down"}
	if c.timeout {
		h = append(h, "Timeout")
	}
	if c.p50 {
		h = append(h, "P50")
	}
	return h
}

func (c columns) cells(r Row, last bool) []string {
	per := "-"
	if r.Retries() {
		per = fmt.Sprintf("%s (%s)", fmtMs(r.PerAttempt), attemptsText(r.Hop))
	}
	// The last hop passes nothing on when it spends nothing: it is a leaf
	// whose attempts are the point of the row.
	down := fmtMs(r.PassedDown)
	if last && r.allowance() == 0 {
		down = "-"
	}
	out := []string{r.Name, fmtMs(r.Entry), per, fmtMs(r.OwnWork), fmtMs(r.Transit + r.Slack), down}
	if c.timeout {
		out = append(out, optMs(r.Timeout))
	}
	if c.p50 {
		out = append(out, optMs(r.P50))
	}
	return out
}

// attemptsText describes a retry policy: "2 attempts, 100 ms backoff".
func attemptsText(h Hop) string {
	s := fmt.Sprintf("%d attempts", h.attempts())
	if h.Backoff > 0 {
		s += ", " + fmtMs(h.Backoff) + " backoff"
	}
	return s
}

func optMs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmtMs(d)
}

// budgetsLine prints the chain of budgets: "2000 → 1900 → 800 ms".
func budgetsLine(p Plan) string {
	bs := p.Budgets()
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = num(ms(b))
	}
	return strings.Join(parts, " → ") + " ms"
}

func verdict(p Plan) string {
	switch len(p.Violations) {
	case 0:
		return "The plan holds."
	case 1:
		return "The plan does not hold: 1 violation."
	}
	return fmt.Sprintf("The plan does not hold: %d violations.", len(p.Violations))
}

// suggestionTitle says what the suggested split is.
func suggestionTitle(p Plan, s Suggestion) string {
	needs := "with the planned allowances and retries no client budget up to " + MaxDuration.String() + " fits"
	if s.MinBudget > 0 {
		needs = "with the planned allowances and retries the chain needs a client budget of at least " + fmtMs(s.MinBudget)
	}
	if len(s.Hops) == 0 {
		return fmt.Sprintf("No split of %s holds: an observed p50 exceeds what is left even with a single attempt per hop and no allowances; %s.",
			fmtMs(p.Budget), needs)
	}
	var parts []string
	if s.FewerAttempts {
		parts = append(parts, "fewer attempts")
	}
	if s.Scale == 1 {
		parts = append(parts, "allowances as planned")
	} else {
		pct := strconv.FormatFloat(math.Floor(s.Scale*1000)/10, 'f', -1, 64)
		parts = append(parts, fmt.Sprintf("allowances scaled to %s%% to fit %s", pct, fmtMs(p.Budget)))
	}
	parts = append(parts, "timeouts set to each attempt's budget")
	return fmt.Sprintf("Suggested split: %s; %s.", strings.Join(parts, ", "), needs)
}

var suggestionHeader = []string{"Hop", "Budget on entry", "Own work", "Transit + slack", "Timeout per attempt", "Attempts"}

// suggestionCells prints suggested hop i; p is the plan it was suggested
// for, so cut attempts show what they were.
func suggestionCells(p Plan, s Suggestion, i int) []string {
	h, r := s.Hops[i], s.Plan.Rows[i]
	att := strconv.Itoa(h.attempts())
	if was := p.Rows[i].attempts(); was != h.attempts() {
		att += fmt.Sprintf(" (was %d)", was)
	}
	if h.attempts() > 1 && h.Backoff > 0 {
		att += ", " + fmtMs(h.Backoff) + " backoff"
	}
	return []string{h.Name, fmtMs(r.Entry), fmtMs(h.OwnWork), fmtMs(h.Transit + h.Slack), fmtMs(h.Timeout), att}
}

func writeTable(w io.Writer, p Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cells []string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	upper := func(cells []string) []string {
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = strings.ToUpper(c)
		}
		return out
	}
	fmt.Fprintf(tw, "Client budget %s, %d hops\n\n", fmtMs(p.Budget), len(p.Rows))
	cols := columnsOf(p.Rows)
	row(upper(cols.header()))
	for i, r := range p.Rows {
		row(cols.cells(r, i == len(p.Rows)-1))
	}
	fmt.Fprintf(tw, "\nBudgets: %s\n%s\n", budgetsLine(p), verdict(p))
	if len(p.Violations) > 0 {
		fmt.Fprintf(tw, "\nVIOLATIONS (%d)\n", len(p.Violations))
		row([]string{"HOP", "KIND", "MESSAGE"})
		for _, v := range p.Violations {
			row([]string{v.Hop, string(v.Kind), v.Message})
		}
	}
	if s := p.Suggestion; s != nil {
		fmt.Fprintf(tw, "\n%s\n", suggestionTitle(p, *s))
		if len(s.Hops) > 0 {
			row(upper(suggestionHeader))
			for i := range s.Hops {
				row(suggestionCells(p, *s, i))
			}
			fmt.Fprintf(tw, "Budgets: %s\n", budgetsLine(s.Plan))
		}
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(tw, "\nNOTES")
		for _, n := range p.Notes {
			fmt.Fprintf(tw, "- %s\n", n)
		}
	}
	return tw.Flush()
}

func writeMarkdown(w io.Writer, p Plan) error {
	var b strings.Builder
	row := func(cells []string) {
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	rule := func(n int) { b.WriteString("|" + strings.Repeat("---|", n) + "\n") }
	fmt.Fprintf(&b, "Client budget **%s**, %d hops.\n\n", fmtMs(p.Budget), len(p.Rows))
	cols := columnsOf(p.Rows)
	row(cols.header())
	rule(len(cols.header()))
	for i, r := range p.Rows {
		row(cols.cells(r, i == len(p.Rows)-1))
	}
	fmt.Fprintf(&b, "\nBudgets: %s. **%s**\n", budgetsLine(p), verdict(p))
	if len(p.Violations) > 0 {
		b.WriteString("\n| Hop | Kind | Violation |\n")
		rule(3)
		for _, v := range p.Violations {
			row([]string{v.Hop, "`" + string(v.Kind) + "`", v.Message})
		}
	}
	if s := p.Suggestion; s != nil {
		fmt.Fprintf(&b, "\n%s\n", suggestionTitle(p, *s))
		if len(s.Hops) > 0 {
			b.WriteString("\n")
			row(append([]string(nil), suggestionHeader...))
			rule(len(suggestionHeader))
			for i := range s.Hops {
				row(suggestionCells(p, *s, i))
			}
			fmt.Fprintf(&b, "\nBudgets: %s.\n", budgetsLine(s.Plan))
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type jsonPlan struct {
	BudgetMs   float64         `json:"budget_ms"`
	Holds      bool            `json:"holds"`
	BudgetsMs  []float64       `json:"budgets_ms"`
	Hops       []jsonRow       `json:"hops"`
	Violations []jsonViolation `json:"violations"`
	Suggestion *jsonSuggestion `json:"suggestion,omitempty"`
	Notes      []string        `json:"notes,omitempty"`
}

type jsonRow struct {
	Name         string   `json:"name"`
	BudgetMs     float64  `json:"budget_ms"`
	Attempts     int      `json:"attempts"`
	BackoffMs    float64  `json:"backoff_ms"`
	PerAttemptMs float64  `json:"per_attempt_ms"`
	OwnWorkMs    float64  `json:"own_work_ms"`
	TransitMs    float64  `json:"transit_ms"`
	SlackMs      float64  `json:"slack_ms"`
	PassedDownMs float64  `json:"passed_down_ms"`
	TimeoutMs    *float64 `json:"timeout_ms,omitempty"`
	P50Ms        *float64 `json:"p50_ms,omitempty"`
}

type jsonViolation struct {
	Kind     Kind               `json:"kind"`
	Hop      string             `json:"hop"`
	Index    int                `json:"index"`
	Message  string             `json:"message"`
	Evidence map[string]float64 `json:"evidence"`
}

type jsonSuggestion struct {
	Scale         float64   `json:"scale"`
	FewerAttempts bool      `json:"fewer_attempts"`
	MinBudgetMs   *float64  `json:"min_budget_ms"`
	Holds         bool      `json:"holds"`
	BudgetsMs     []float64 `json:"budgets_ms,omitempty"`
	Hops          []jsonRow `json:"hops"`
}

func optMsJSON(d time.Duration) *float64 {
	if d == 0 {
		return nil
	}
	v := ms(d)
	return &v
}

func jsonRows(rows []Row) []jsonRow {
	out := make([]jsonRow, len(rows))
	for i, r := range rows {
		out[i] = jsonRow{
			Name: r.Name, BudgetMs: ms(r.Entry), Attempts: r.attempts(), BackoffMs: ms(r.Backoff),
			PerAttemptMs: ms(r.PerAttempt), OwnWorkMs: ms(r.OwnWork), TransitMs: ms(r.Transit), SlackMs: ms(r.Slack),
			PassedDownMs: ms(r.PassedDown), TimeoutMs: optMsJSON(r.Timeout), P50Ms: optMsJSON(r.P50),
		}
	}
	return out
}

func budgetsMs(p Plan) []float64 {
	bs := p.Budgets()
	out := make([]float64, len(bs))
	for i, b := range bs {
		out[i] = ms(b)
	}
	return out
}

func writeJSON(w io.Writer, p Plan) error {
	out := jsonPlan{
		BudgetMs: ms(p.Budget), Holds: p.Holds(), BudgetsMs: budgetsMs(p), Hops: jsonRows(p.Rows),
		Violations: make([]jsonViolation, len(p.Violations)), Notes: p.Notes,
	}
	for i, v := range p.Violations {
		out.Violations[i] = jsonViolation{Kind: v.Kind, Hop: v.Hop, Index: v.Index, Message: v.Message, Evidence: v.Evidence}
	}
	if s := p.Suggestion; s != nil {
		js := &jsonSuggestion{Scale: s.Scale, FewerAttempts: s.FewerAttempts, MinBudgetMs: optMsJSON(s.MinBudget), Hops: []jsonRow{}}
		if len(s.Hops) > 0 {
			js.Holds, js.BudgetsMs, js.Hops = s.Plan.Holds(), budgetsMs(s.Plan), jsonRows(s.Plan.Rows)
		}
		out.Suggestion = js
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
