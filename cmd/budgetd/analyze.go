package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/jaegerapi"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/engine"
	"github.com/budgetd/budgetd/store/oteltraces"
)

const analyzeUsage = `Usage:
  budgetd analyze [flags] FILE...
  budgetd analyze --from-store [--since 1h] [--until TIME] [flags]
  budgetd analyze --from-jaeger URL [--since 1h] [--until TIME] [--service NAME]... [flags]
  budgetd analyze --from-otel-traces SOURCE [--table [DB.]otel_traces] [--since 1h] [--until TIME] [flags]

Run the detectors offline over trace files, over spans stored by budgetd
serve, or over the traces a running Jaeger holds. Exits 0 when it ran,
whatever it found. The format of each file is told from its content:
  - OTLP: protobuf, one JSON ExportTraceServiceRequest, or the Collector file
    exporter's JSON lines;
  - Jaeger JSON: the Jaeger UI's trace download or the query API's answer
    ({"data":[{"traceID":…,"spans":[…],"processes":{…}}]});
  - Zipkin v2 JSON: an array of spans ([{"traceId":…,"id":…},…]).
Jaeger and Zipkin spans are mapped as the OpenTelemetry Collector maps them;
docs/formats.md says what each format can carry.

--from-jaeger reads Jaeger's query service (the UI's URL, port 16686) over its
api_v3 HTTP API, which answers in OTLP: every trace with a span starting in
the window, whole, of each --service, or of every service Jaeger lists but
its own ("jaeger"). A window that returns a page full of traces is split in
halves and asked again; traces are read once; reading stops at --max-spans,
saying so on stderr. The environment variable BUDGETD_JAEGER_TOKEN, when set,
is sent as a bearer token.

--from-otel-traces reads, in place and only reading, the otel_traces table
the OpenTelemetry Collector's ClickHouse exporter writes. SOURCE is a
ClickHouse server, clickhouse://[user[:password]@]host:port[/DATABASE], or a
chDB data directory (the embedded engine's files). The table is --table,
DATABASE.TABLE or TABLE in DATABASE (default "default", the exporter's).
Every trace with a span starting in the window is read whole, up to
--max-spans (whole traces only, saying so on stderr); the exporter's
<table>_trace_id_ts lookup narrows the reads when it exists. Attribute
values come back as strings, as the exporter stored them.

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
	fromJaeger := fs.String("from-jaeger", "", "read traces from the Jaeger query service at `URL` (http://host:16686) instead of files")
	fromOTel := fs.String("from-otel-traces", "", "read the Collector ClickHouse exporter's traces from `SOURCE` (clickhouse://host:9000/DATABASE, or a chDB data directory) instead of files")
	table := fs.String("table", "otel_traces", "with --from-otel-traces: the exporter's traces `table`, TABLE or DATABASE.TABLE")
	var services []string
	fs.Func("service", "with --from-jaeger: read this service's traces (repeat for more; default every service but Jaeger's own)", func(v string) error {
		if v == "" {
			return errors.New("empty service name")
		}
		services = append(services, v)
		return nil
	})
	since := fs.String("since", "1h", "with --from-store, --from-jaeger or --from-otel-traces: start of the window, a duration before now or an RFC 3339 `time`")
	until := fs.String("until", "", "with --from-store, --from-jaeger or --from-otel-traces: end of the window (default now)")
	maxSpans := fs.Int("max-spans", 1_000_000, "with --from-store, --from-jaeger or --from-otel-traces: read at most this many `spans`")
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
	jaeger, otel := *fromJaeger != "", *fromOTel != ""
	var sources []string
	for _, src := range []struct {
		name string
		on   bool
	}{{"files", len(files) > 0}, {"--from-store", *fromStore}, {"--from-jaeger", jaeger}, {"--from-otel-traces", otel}} {
		if src.on {
			sources = append(sources, src.name)
		}
	}
	tableSet := false
	fs.Visit(func(f *flag.Flag) { tableSet = tableSet || f.Name == "table" })
	switch {
	case len(sources) > 1:
		return usageError{"analyze: give " + strings.Join(sources, " or ") + ", not both"}
	case len(sources) == 0:
		return usageError{"analyze: no trace files given (or use --from-store, --from-jaeger or --from-otel-traces)"}
	case len(services) > 0 && !jaeger:
		return usageError{"analyze: --service applies only with --from-jaeger"}
	case tableSet && !otel:
		return usageError{"analyze: --table applies only with --from-otel-traces"}
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
	switch {
	case *fromStore || jaeger || otel:
		w, err := parseWindow(*since, *until, now)
		if err != nil {
			return usageError{"analyze: " + err.Error()}
		}
		if otel {
			src, srcErr := otelSource(*fromOTel, *table)
			if srcErr != nil {
				return usageError{"analyze: " + srcErr.Error()}
			}
			src.read.Window, src.read.MaxSpans = w, *maxSpans
			spans, err = readOTelSpans(ctx, src, cfg.Store.Timeout, stderr)
		} else if jaeger {
			jc := jaegerapi.DefaultConfig()
			jc.URL, jc.Services, jc.MaxSpans = *fromJaeger, services, *maxSpans
			jc.Since, jc.Until = time.Unix(0, int64(w.SinceNs)).UTC(), time.Unix(0, int64(w.UntilNs)).UTC()
			jc.Token = os.Getenv(jaegerTokenEnv)
			if err := jc.Validate(); err != nil {
				return usageError{"analyze: " + strings.ReplaceAll(err.Error(), "\n", "; ")}
			}
			spans, err = readJaegerSpans(ctx, jc, stderr)
		} else {
			spans, err = readStoreSpans(ctx, cfg.Store, w, *maxSpans)
		}
		if err != nil {
			return err
		}
	default:
		if spans, err = readSpanFiles(files, stderr); err != nil {
			return err
		}
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

// otelTraces is where --from-otel-traces reads: an engine connection and
// the table on it.
type otelTraces struct {
	engine engine.Config
	read   oteltraces.Config
}

// otelSource reads --from-otel-traces and --table (oteltraces.ParseSource).
func otelSource(source, table string) (otelTraces, error) {
	src, err := oteltraces.ParseSource(source, table)
	if err != nil {
		return otelTraces{}, fmt.Errorf("--from-otel-traces/--table: %w", err)
	}
	return otelTraces{engine: src.Engine, read: oteltraces.Config{Database: src.Database, Table: src.Table}}, nil
}

// readOTelSpans reads the exporter's table. What a user must know about
// the result goes to stderr, as for Jaeger.
func readOTelSpans(ctx context.Context, src otelTraces, timeout time.Duration, stderr io.Writer) ([]schema.Span, error) {
	if err := src.read.Validate(); err != nil {
		return nil, usageError{"analyze: --from-otel-traces: " + err.Error()}
	}
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return nil, err
	}
	conn, err := engine.Connect(src.engine)
	if err != nil {
		return nil, fmt.Errorf("open %s engine: %w", src.engine.Engine, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, max(timeout, 5*time.Minute))
	defer cancel()
	res, err := oteltraces.Read(ctx, conn, src.read, conv)
	if err != nil {
		return nil, err
	}
	name := src.read.Database + "." + src.read.Table
	if res.Rejected > 0 {
		fmt.Fprintf(stderr, "budgetd: %s: %d spans skipped: %s\n", name, res.Rejected, res.RejectReason)
	}
	if res.Truncated {
		fmt.Fprintf(stderr, "budgetd: %s: result truncated at --max-spans %d: read %d spans of %d whole traces, and left the window's later traces unread (narrow --since/--until or raise --max-spans)\n",
			name, src.read.MaxSpans, len(res.Spans), res.Traces)
	}
	if res.Traces == 0 && !res.Truncated {
		fmt.Fprintf(stderr, "budgetd: %s: no traces start between %s and %s\n", name,
			time.Unix(0, int64(src.read.Window.SinceNs)).UTC().Format(time.RFC3339), time.Unix(0, int64(src.read.Window.Until())).UTC().Format(time.RFC3339))
	}
	return res.Spans, nil
}

// jaegerTokenEnv names the environment variable whose value --from-jaeger
// sends as a bearer token. Not a flag: a flag's value shows in the process
// list and the shell's history.
const jaegerTokenEnv = "BUDGETD_JAEGER_TOKEN"

// readJaegerSpans reads the traces jc names from Jaeger. What a user must
// know about the result (spans skipped, a read cut short, a service left
// out, nothing found) goes to stderr, as readSpanFiles reports skipped
// spans.
func readJaegerSpans(ctx context.Context, jc jaegerapi.Config, stderr io.Writer) ([]schema.Span, error) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return nil, err
	}
	res, err := jaegerapi.Read(ctx, jc, conv)
	if err != nil {
		return nil, fmt.Errorf("read jaeger %s: %w", redactURL(jc.URL), err)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(stderr, "budgetd: jaeger: left out service %q, Jaeger's own traces (--service %s reads them)\n", s, s)
	}
	if res.Rejected > 0 {
		fmt.Fprintf(stderr, "budgetd: jaeger: %d spans skipped: %s\n", res.Rejected, res.RejectReason)
	}
	if res.Crowded > 0 {
		fmt.Fprintf(stderr, "budgetd: jaeger: in %d windows of %v a service still had %d traces, a full page: traces starting there may be missing\n",
			res.Crowded, jc.MinWindow, jc.NumTraces)
	}
	if res.Truncated {
		fmt.Fprintf(stderr, "budgetd: jaeger: result truncated at --max-spans %d: read %d spans of %d traces, and left the rest of the window unread (narrow --since/--until, name a --service, or raise --max-spans)\n",
			jc.MaxSpans, len(res.Spans), res.Traces)
	}
	if res.Traces == 0 {
		which := fmt.Sprintf("any of the %d services it lists", len(res.Services))
		switch {
		case len(jc.Services) > 0:
			which = strings.Join(jc.Services, ", ")
		case len(res.Services) == 0:
			which = "any service (it lists none)"
		}
		fmt.Fprintf(stderr, "budgetd: jaeger: no traces of %s start between %s and %s\n",
			which, jc.Since.Format(time.RFC3339), jc.Until.Format(time.RFC3339))
	}
	return res.Spans, nil
}

// redactURL returns raw with any password replaced, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the --from-jaeger URL)"
	}
	return u.Redacted()
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
