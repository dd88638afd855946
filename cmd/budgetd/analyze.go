package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/engine"
)

const analyzeUsage = `Usage:
  budgetd analyze [flags] FILE...
  budgetd analyze --from-store [--since 1h] [--until TIME] [flags]

Run the detectors offline over trace files or over spans stored by budgetd
serve. Exits 0 when it ran, whatever it found. The format of each file is told
from its content:
  - OTLP: protobuf, one JSON ExportTraceServiceRequest, or the Collector file
    exporter's JSON lines;
  - Jaeger JSON: the Jaeger UI's trace download or the query API's answer
    ({"data":[{"traceID":…,"spans":[…],"processes":{…}}]});
  - Zipkin v2 JSON: an array of spans ([{"traceId":…,"id":…},…]).
Jaeger and Zipkin spans are mapped as the OpenTelemetry Collector maps them;
docs/formats.md says what each format can carry.

The table starts with the PROBLEMS: the findings grouped by kind and
caller → callee edge (retry amplification: by path), ranked by impact, each
with a suggested fix (docs/problems.md). Then come the FINDINGS, one per span,
and the PATHS. --output json prints {"findings":[…],"paths":[…],"problems":[…]}.

Flags:
`

func analyzeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), analyzeUsage); fs.PrintDefaults() }
	flags := addConfigFlags(fs)
	output := fs.String("output", "table", "output `format`: table or json")
	fromStore := fs.Bool("from-store", false, "read spans from the configured store instead of files")
	since := fs.String("since", "1h", "with --from-store: start of the window, a duration before now or an RFC 3339 `time`")
	until := fs.String("until", "", "with --from-store: end of the window (default now)")
	maxSpans := fs.Int("max-spans", 1_000_000, "with --from-store: read at most this many `spans`")
	nowFlag := fs.String("now", "", "detection `time` written into findings and at which problems are judged (RFC 3339, default now), for reproducible output")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil
		}
		return usageError{err.Error()}
	}
	if *output != "table" && *output != "json" {
		return usageError{fmt.Sprintf("analyze: --output must be table or json, not %q", *output)}
	}
	files := fs.Args()
	switch {
	case *fromStore && len(files) > 0:
		return usageError{"analyze: give files or --from-store, not both"}
	case !*fromStore && len(files) == 0:
		return usageError{"analyze: no trace files given (or use --from-store)"}
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		if now, err = time.Parse(time.RFC3339, *nowFlag); err != nil {
			return usageError{fmt.Sprintf("analyze: --now: %v", err)}
		}
	}

	var spans []schema.Span
	if *fromStore {
		w, err := parseWindow(*since, *until, now)
		if err != nil {
			return usageError{"analyze: " + err.Error()}
		}
		if spans, err = readStoreSpans(ctx, cfg.Store, w, *maxSpans); err != nil {
			return err
		}
	} else if spans, err = readSpanFiles(files, stderr); err != nil {
		return err
	}

	report := analyze.Analyze(spans, now, cfg.Analyze.Detect)
	res := analysis{Report: report, Problems: groupProblems(report, now)}
	if *output == "json" {
		return writeJSON(stdout, res)
	}
	return writeReportTable(stdout, res)
}

// analysis is what analyze prints: the report, and its findings grouped
// into problems. The report's keys come first, as before problems existed.
type analysis struct {
	analyze.Report
	Problems []problems.Problem `json:"problems"`
}

// groupProblems groups the report's findings. Every finding of an offline
// analysis is detected at now, so every problem is active; the shares are
// of the requests the report counted per path.
func groupProblems(r analyze.Report, now time.Time) []problems.Problem {
	reqs := make(map[string]uint64, len(r.Paths))
	for _, p := range r.Paths {
		reqs[p.Path] = uint64(p.Requests)
	}
	return problems.Group(r.Findings, problems.Options{Now: now, PathRequests: reqs})
}

// readSpanFiles reads every file; rejected spans are reported on stderr, an
// unreadable file is an error.
func readSpanFiles(files []string, stderr io.Writer) ([]schema.Span, error) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return nil, err
	}
	var spans []schema.Span
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		res, err := ingest.ReadSpans(f, conv)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if res.Rejected > 0 {
			fmt.Fprintf(stderr, "budgetd: %s: %d spans skipped: %s\n", name, res.Rejected, res.RejectReason)
		}
		spans = append(spans, res.Spans...)
	}
	return spans, nil
}

func readStoreSpans(ctx context.Context, cfg engine.Config, w store.Window, limit int) ([]schema.Span, error) {
	st, err := engine.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", cfg.Engine, err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, max(cfg.Timeout, 5*time.Minute))
	defer cancel()
	spans, err := st.Spans(ctx, w, limit)
	if err != nil {
		return nil, err
	}
	return spans, nil
}

// parseWindow reads --since/--until: each a duration before now ("1h") or
// an RFC 3339 time; an empty until is now.
func parseWindow(since, until string, now time.Time) (store.Window, error) {
	parse := func(name, v string) (time.Time, error) {
		if d, err := time.ParseDuration(v); err == nil {
			if d < 0 {
				return time.Time{}, fmt.Errorf("--%s must not be negative", name)
			}
			return now.Add(-d), nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("--%s %q is neither a duration nor an RFC 3339 time", name, v)
		}
		return t, nil
	}
	from, err := parse("since", since)
	if err != nil {
		return store.Window{}, err
	}
	to := now
	if until != "" {
		if to, err = parse("until", until); err != nil {
			return store.Window{}, err
		}
	}
	if to.Before(from) {
		return store.Window{}, errors.New("--until is before --since")
	}
	return store.WindowOf(from, to), nil
}

// writeJSON prints v as indented JSON without HTML escaping, so paths read
// "a > b" as in the golden files.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeReportTable(w io.Writer, r analysis) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "PROBLEMS (%d)\n", len(r.Problems))
	if len(r.Problems) > 0 {
		fmt.Fprintln(tw, "SEVERITY\tKIND\tCALLER → CALLEE\tOCCURRENCES\tREQUESTS\tIMPACT\tSUGGESTION")
		for i := range r.Problems {
			p := &r.Problems[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", p.Severity, p.Kind, p.Key().Edge(), p.Occurrences, p.AffectedRequests, p.Impact, p.Suggestion)
		}
	}
	fmt.Fprintf(tw, "\nFINDINGS (%d)\n", len(r.Findings))
	if len(r.Findings) > 0 {
		fmt.Fprintln(tw, "SEVERITY\tKIND\tINFERRED\tTRACE\tMESSAGE")
		for _, f := range r.Findings {
			trace := f.TraceID
			if trace == "" {
				trace = "(edge)"
			}
			// Findings resting on a timeout or deadline worked out from
			// timing show the estimate's confidence; the others "-".
			inferred := "-"
			if f.Evidence["inferred"] == 1 {
				inferred = fmt.Sprintf("%.2f", f.Evidence["confidence"])
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Severity, f.Kind, inferred, trace, f.Message)
		}
	}
	fmt.Fprintf(tw, "\nPATHS (%d)\n", len(r.Paths))
	if len(r.Paths) > 0 {
		fmt.Fprintln(tw, "REQUESTS\tMAX CALLS/TRACE\tORPHANED MS\tFINDINGS\tPATH")
		for _, p := range r.Paths {
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%s\t%s\n", p.Requests, p.MaxCallsPerTrace, p.OrphanedMs, kindCounts(p.FindingsByKind), p.Path)
		}
	}
	return tw.Flush()
}

func kindCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
