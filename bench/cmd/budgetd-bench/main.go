// Command budgetd-bench loads the OpenTelemetry Collector (otlp → nop),
// Jaeger v2 (badger) and budgetd (embedded store, and a ClickHouse server)
// with the same OTLP load on this machine, one after the other, measures
// the floor (the Collector's receiving cost plus the embedded engine's
// INSERT … SELECT of the same rows), and prints a comparison table.
//
//	go run ./bench/cmd/budgetd-bench [-duration 30s] [-clients 8] [-targets collector,jaeger,floor,embedded]
//
// With -baseline and -rounds it compares two budgetd binaries side by
// side, several times, by their medians and pair by pair. With -rate the
// load keeps to that many spans a second instead of going flat out.
//
// `make bench-compare` builds what it needs and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/budgetd/budgetd/bench"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetd-bench:", err)
		os.Exit(1)
	}
}

type row struct {
	target string // the -targets name
	name   string
	res    bench.Result
	cpu    time.Duration
	rssMiB float64
	stored float64 // spans stored in the measured window; -1 for the Collector
	// drain is how long budgetd took after the load stopped to store what
	// it had acknowledged; the window's CPU and rate include it.
	drain time.Duration
	goMiB float64 // heap Go holds at the end (budgetd); 0 for the others
	note  string
	// floorPerM is the floor row's CPU s per million spans, which it
	// measures without a load of its own; 0 for the others.
	floorPerM float64
	baseline  bool // measured on -baseline's binary
}

// window is the period the row's CPU and sustained rate are measured
// over: the load, then budgetd's drain.
func (r row) window() time.Duration { return r.res.Elapsed + r.drain }

// sustained is the row's sustained rate: budgetd's is what it stores over
// the load and the drain after it, since what it acknowledges beyond that
// only fills its write-ahead log, until the log is full.
func (r row) sustained() float64 {
	s := r.res.SpansPerSecond()
	if r.stored >= 0 {
		s = min(s, r.stored/r.window().Seconds())
	}
	return s
}

// cpuPerMillion is CPU seconds per million sustained spans.
func (r row) cpuPerMillion() float64 {
	if r.floorPerM > 0 {
		return r.floorPerM
	}
	if s := r.sustained(); s > 0 {
		return r.cpu.Seconds() / (s * r.window().Seconds() / 1e6)
	}
	return 0
}

// lbCollectorConfig is the loadbalancing Collector's configuration the
// replicas-N targets run: the one docs/scale-out.md gives users.
const lbCollectorConfig = "deploy/collector/loadbalancing.yaml"

// settings are the flags every target's run shares.
type settings struct {
	work, budgetd, otelcol, otelcolLB, lbConfig, jaeger, profile string
	clients, spansPer                                            int
	warmup, duration                                             time.Duration
	rate                                                         float64 // spans a second the load keeps to; 0: flat out
	floorRows                                                    uint64
	baseline                                                     bool   // budgetd is -baseline's binary
	tag                                                          string // added to the profiles' names: the round, the baseline
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("budgetd-bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 30*time.Second, "measured load `period` per target")
	warmup := fs.Duration("warmup", 5*time.Second, "unmeasured load `period` before it")
	clients := fs.Int("clients", 8, "concurrent senders")
	rate := fs.Float64("rate", 0, "the senders together keep to this many `spans` a second (0: each sends again as soon as it is acknowledged): a target measured at a traffic it keeps up with")
	spansPer := fs.Int("spans-per-request", 1000, "spans in one export request")
	distinct := fs.Int("requests", 200, "distinct pre-built requests, sent round-robin")
	handlerSpans := fs.Bool("handler-spans", false, "put every request's work inside an INTERNAL handler span, as Spring MVC's and Express's instrumentation record it (about a fifth of the spans)")
	targets := fs.String("targets", "collector,jaeger,floor,embedded", "comma-separated targets to load: collector, jaeger, floor, embedded, clickhouse, replicas-1, replicas-2 (budgetd replicas on clickhouse-server behind the loadbalancing Collector)")
	budgetdBin := fs.String("budgetd", "bin/budgetd", "budgetd `binary`")
	otelcolBin := fs.String("otelcol", ".cache/otelcol/otelcol-budgetd", "Collector `binary` (make test-setup builds it)")
	otelcolLBBin := fs.String("otelcol-lb", ".cache/otelcol/otelcol-budgetd-lb", "Collector `binary` with the loadbalancing exporter, for replicas-N (make test-setup builds it)")
	jaegerBin := fs.String("jaeger", ".cache/bin/jaeger", "Jaeger v2 `binary` (make test-setup builds it)")
	floorRows := fs.Uint64("floor-rows", 1_000_000, "the floor's INSERT … SELECT repeats until at least this many `rows` are inserted")
	baseline := fs.String("baseline", "", "a second budgetd `binary` to compare with -budgetd: each budgetd target also runs on it, right before or after, and the two are compared by their medians and pair by pair")
	rounds := fs.Int("rounds", 1, "run every target this many `times`, one round after the other, and print the medians")
	profile := fs.String("profile", "", "write each budgetd target's CPU profile of the measured load (not the drain after it) and its heap profile at the load's end into this `directory`")
	querySpans := fs.Int("query-spans", 0, "instead of loading: fill each store engine with this many `spans` and time the API's queries")
	queryEngines := fs.String("query-engines", "embedded,clickhouse", "comma-separated engines -query-spans fills: embedded (chDB), clickhouse (an 18.16 server the harness starts)")
	queryIngest := fs.Int("query-ingest", 0, "with -query-spans: keep writing this many `spans` a second (analysed, in one batch a second) into the store while its queries are timed; 0 times them on an idle store")
	queryRuns := fs.Int("query-runs", 21, "with -query-spans: time each query this many `times` (p50 and p99 of them); the p99 of 21 is their second slowest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *querySpans > 0 {
		if *queryIngest < 0 {
			return fmt.Errorf("-query-ingest: want spans a second ≥ 0, got %d", *queryIngest)
		}
		if *queryRuns < 1 {
			return fmt.Errorf("-query-runs: want at least 1, got %d", *queryRuns)
		}
		return runQueries(ctx, out, *querySpans, *queryIngest, *queryRuns, strings.Split(*queryEngines, ","))
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds: want at least 1, got %d", *rounds)
	}
	if *rate < 0 {
		return fmt.Errorf("-rate: want spans a second ≥ 0, got %g", *rate)
	}
	names := strings.Split(*targets, ",")
	if *baseline != "" && !slices.ContainsFunc(names, isBudgetd) {
		return fmt.Errorf("-baseline: no budgetd target in -targets %q to run it as", *targets)
	}
	// Targets run in their own directories: binaries must be absolute.
	lbConfig := lbCollectorConfig
	bins := []*string{budgetdBin, otelcolBin, otelcolLBBin, jaegerBin, &lbConfig}
	if *baseline != "" {
		bins = append(bins, baseline)
	}
	for _, p := range bins {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	work, err := os.MkdirTemp("", "budgetd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	set := settings{work: work, budgetd: *budgetdBin, otelcol: *otelcolBin, otelcolLB: *otelcolLBBin, lbConfig: lbConfig, jaeger: *jaegerBin, profile: *profile,
		clients: *clients, spansPer: *spansPer, warmup: *warmup, duration: *duration, rate: *rate, floorRows: *floorRows}

	fmt.Fprintf(out, "building %d requests of %d spans...\n", *distinct, *spansPer)
	load := bench.Requests(*distinct, *spansPer)
	if *handlerSpans {
		fmt.Fprintln(out, "each request's work inside an INTERNAL handler span (-handler-spans)")
		load = bench.HandlerRequests(*distinct, *spansPer)
	}

	var all [][]row
	for k := range *rounds {
		if *rounds > 1 {
			fmt.Fprintf(out, "round %d of %d\n", k+1, *rounds)
		}
		if *rounds > 1 {
			set.tag = fmt.Sprintf("-round%d", k+1)
		}
		rows, err := runRound(ctx, out, set, *baseline, k%2 == 1, names, load)
		if err != nil {
			return err
		}
		all = append(all, rows)
	}
	print(out, all, *clients, *spansPer, *rate)
	return nil
}

// isBudgetd reports whether the -targets name is budgetd's.
func isBudgetd(name string) bool {
	return name == "embedded" || name == "clickhouse" || strings.HasPrefix(name, "replicas-")
}

// runRound runs the named targets once each, in order. With a baseline
// binary, each budgetd target runs again on it: after the -budgetd run, or
// before it when baselineFirst (rounds alternate, so neither binary always
// runs on a machine the other has just warmed).
func runRound(ctx context.Context, out io.Writer, set settings, baseline string, baselineFirst bool, names []string, load *bench.Load) ([]row, error) {
	var rows []row
	var floor *bench.InsertFloor
	floorAt := -1
	for _, name := range names {
		if name == "floor" {
			f, err := measureFloor(ctx, out, set, load)
			if err != nil {
				return nil, err
			}
			floor, floorAt = &f, len(rows)
			continue
		}
		binaries := []settings{set}
		if baseline != "" && isBudgetd(name) {
			other := set
			other.budgetd, other.baseline, other.tag = baseline, true, set.tag+"-baseline"
			binaries = append(binaries, other)
			if baselineFirst {
				slices.Reverse(binaries)
			}
		}
		for _, on := range binaries {
			r, err := runTarget(ctx, out, on, name, load)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
	}
	if floor != nil {
		// The floor's receiving part is the Collector's cost in this run;
		// a run without the Collector measures it for the floor alone.
		collector, ok := rowOf(rows, "collector")
		if !ok {
			var err error
			if collector, err = runTarget(ctx, out, set, "collector", load); err != nil {
				return nil, err
			}
		}
		rows = slices.Insert(rows, floorAt, floorRow(collector, *floor))
	}
	return rows, nil
}

// runTarget starts one target in its own directory, measures it and stops it.
func runTarget(ctx context.Context, out io.Writer, set settings, name string, load *bench.Load) (row, error) {
	dir := filepath.Join(set.work, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return row{}, err
	}
	t, err := startTarget(ctx, set, name, dir)
	if err != nil {
		return row{}, err
	}
	fmt.Fprintf(out, "loading %s for %s...\n", t.Name, set.warmup+set.duration)
	var prof string
	if set.profile != "" && t.API != "" {
		prof = filepath.Join(set.profile, name+set.tag)
	}
	r, err := measure(ctx, t, load, set.spansPer, set.clients, set.warmup, set.duration, set.rate, prof)
	if serr := t.Stop(); err == nil {
		err = serr
	}
	r.target = name
	if set.baseline {
		r.name += " (baseline)"
		r.baseline = true
	}
	return r, err
}

// startTarget starts the target called name.
func startTarget(ctx context.Context, set settings, name, dir string) (*bench.Target, error) {
	var extra []string
	if set.profile != "" {
		extra = []string{"--api.pprof", "true"}
	}
	switch name {
	case "collector":
		return bench.StartCollector(ctx, set.otelcol, dir)
	case "jaeger":
		t, err := bench.StartJaeger(ctx, set.jaeger, dir)
		if err != nil && errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w: run `make test-setup` (scripts/install-jaeger.sh)", err)
		}
		return t, err
	case "embedded":
		return bench.StartBudgetd(ctx, set.budgetd, dir, "budgetd embedded", extra...)
	case "replicas-1", "replicas-2":
		srv, err := clickhousetest.StartIn(filepath.Join(dir, "clickhouse"))
		if err != nil {
			return nil, err
		}
		n := int(name[len(name)-1] - '0')
		t, err := bench.StartReplicas(ctx, set.budgetd, set.otelcolLB, set.lbConfig, dir, srv.DSN("budgetd"), n)
		if err != nil {
			_ = srv.Stop()
			return nil, err
		}
		t.SetExtra(srv.PID, srv.Stop)
		return t, nil
	case "clickhouse":
		srv, err := clickhousetest.StartIn(filepath.Join(dir, "clickhouse"))
		if err != nil {
			return nil, err
		}
		t, err := bench.StartBudgetd(ctx, set.budgetd, dir, "budgetd clickhouse-server 18.16",
			append(extra, "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("budgetd"))...)
		if err != nil {
			_ = srv.Stop()
			return nil, err
		}
		t.SetExtra(srv.PID, srv.Stop)
		return t, nil
	default:
		return nil, fmt.Errorf("unknown target %q", name)
	}
}

// measureFloor writes the load's spans once through the embedded store (in
// this process) and measures the INSERT … SELECT of them.
func measureFloor(ctx context.Context, out io.Writer, set settings, load *bench.Load) (bench.InsertFloor, error) {
	st, err := embedded.Open(ctx, embedded.Config{DataDir: filepath.Join(set.work, "floor", "chdb"), Database: "floor"})
	if err != nil {
		return bench.InsertFloor{}, err
	}
	defer st.Close()
	if err := fillFloor(ctx, out, st, load); err != nil {
		return bench.InsertFloor{}, err
	}
	fmt.Fprintf(out, "floor: INSERT … SELECT until %d rows are inserted...\n", set.floorRows)
	return bench.MeasureInsertFloor(ctx, st, set.floorRows)
}

// fillFloor writes the load's spans through the store in budgetd's drainer
// batches; the spans are garbage once it returns.
func fillFloor(ctx context.Context, out io.Writer, st *chsql.Store, load *bench.Load) error {
	spans, err := load.Spans()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "floor: writing %d spans through the embedded store...\n", len(spans))
	return bench.FillSpans(ctx, st, spans, durable.DefaultConfig().WAL.BatchSpans)
}

// floorRow is the floor's table row: the Collector's CPU per span plus the
// INSERT … SELECT's.
func floorRow(collector row, f bench.InsertFloor) row {
	receive, insert := collector.cpuPerMillion(), f.CPUPerMillion()
	return row{target: "floor", name: "floor: collector decode + chDB INSERT … SELECT", stored: -1, floorPerM: receive + insert,
		note: fmt.Sprintf("%.2f collector + %.2f INSERT … SELECT (%d rows in %.1f s, merges included)",
			receive, insert, f.Rows, f.Elapsed.Seconds())}
}

// rowOf returns the row of the target called name.
func rowOf(rows []row, name string) (row, bool) {
	for _, r := range rows {
		if r.target == name {
			return r, true
		}
	}
	return row{}, false
}

// measure warms the target up, then drives it for duration while reading
// its processes' CPU time at both ends of the measured window. budgetd
// acknowledges faster than it stores while its write-ahead log has room,
// so for budgetd the window starts once the warmup's spans are stored and
// ends once the load's are: its stored spans then are the load's, as they
// are once the log is full and the surplus is refused. Its sustained rate
// is taken over that window. Its CPU is read later at both ends, once the
// analysis has also written what it took of those spans (assembly holds a
// trace until it has been idle, analyze.assembly.idle): read at the
// stored mark it left out the analysis of the load's last idle period and
// counted the warmup's instead (docs/performance.md, Round 2's step 35).
// With a profile path prefix it also records budgetd's CPU profile over
// the load (prefix.cpu.pprof) and its heap at the end of the load
// (prefix.heap.pprof).
func measure(ctx context.Context, t *bench.Target, load *bench.Load, spansPer, clients int, warmup, duration time.Duration, rate float64, profile string) (row, error) {
	warm, err := bench.Drive(ctx, t.Endpoint, load, spansPer, clients, 0, warmup, rate)
	if err != nil {
		return row{}, err
	}
	limit := drainLimit(warmup + duration)
	acked := warm.Spans
	if err := waitStored(ctx, t, acked, limit); err != nil {
		return row{}, err
	}
	if err := waitAnalysed(ctx, t, limit); err != nil {
		return row{}, err
	}
	cpu0, err := cpuOf(t)
	if err != nil {
		return row{}, err
	}
	stored0, err := storedOf(ctx, t)
	if err != nil {
		return row{}, err
	}
	profDone := make(chan error, 1)
	if profile != "" {
		go func() {
			profDone <- bench.SaveProfile(ctx, t.API, fmt.Sprintf("profile?seconds=%d", int(duration.Seconds())), profile+".cpu.pprof")
		}()
	} else {
		profDone <- nil
	}
	res, err := bench.Drive(ctx, t.Endpoint, load, spansPer, clients, 0, duration, rate)
	if perr := <-profDone; err == nil {
		err = perr
	}
	if err == nil && profile != "" {
		err = bench.SaveProfile(ctx, t.API, "heap", profile+".heap.pprof")
	}
	if err != nil {
		return row{}, err
	}
	drained := time.Now()
	if err := waitStored(ctx, t, acked+res.Spans, limit); err != nil {
		return row{}, err
	}
	drain := time.Since(drained)
	stored1, err := storedOf(ctx, t)
	if err != nil {
		return row{}, err
	}
	if err := waitAnalysed(ctx, t, limit); err != nil {
		return row{}, err
	}
	cpu1, err := cpuOf(t)
	if err != nil {
		return row{}, err
	}
	var goMiB float64
	if t.API != "" {
		// Heap memory Go holds from the OS and has not returned: its part
		// of the RSS, give or take stacks and runtime structures.
		sys, err := sumMetric(ctx, t, "go_memstats_heap_sys_bytes")
		if err != nil {
			return row{}, err
		}
		released, err := sumMetric(ctx, t, "go_memstats_heap_released_bytes")
		if err != nil {
			return row{}, err
		}
		goMiB = (sys - released) / (1 << 20)
	}
	var rss int64
	for _, pid := range t.PIDs() {
		r, err := bench.PeakRSS(pid)
		if err != nil {
			return row{}, err
		}
		rss += r
	}
	stored := stored1 - stored0
	var note string
	switch {
	case t.AckMeansStored:
		stored = float64(res.Spans)
		note = "stored/s = acked/s (no batch processor, no exporter queue; badger does not fsync each write)"
	case t.API == "":
		stored = -1
	}
	if stored < 0 {
		drain = 0 // nothing was waited for
	}
	return row{name: t.Name, res: res, cpu: cpu1 - cpu0, rssMiB: float64(rss) / (1 << 20), stored: stored, drain: drain, goMiB: goMiB, note: note}, nil
}

// drainLimit bounds the wait for budgetd to store what it acknowledged
// during a load of this length: ten times as long, and a minute more.
func drainLimit(load time.Duration) time.Duration { return 10*load + time.Minute }

// waitStored returns once budgetd has stored acked spans (the harness's
// spans carry fresh ids, so each acknowledged span is stored once), at
// once for a target that is not budgetd.
func waitStored(ctx context.Context, t *bench.Target, acked int64, limit time.Duration) error {
	return poll(ctx, t, limit, func() (bool, error) {
		stored, err := storedOf(ctx, t)
		if err != nil || stored >= float64(acked) {
			return true, err
		}
		return false, fmt.Errorf("%s stored %.0f of the %d spans it acknowledged within %s", t.Name, stored, acked, limit)
	})
}

// waitAnalysed returns once budgetd holds no spans for analysis: none in
// assembly and none taken for an analysis round not yet written, on two
// reads in a row (a round taking the last spans between the reads of the
// two gauges shows neither; once no spans arrive, the next read sees it).
// At once for a target that is not budgetd.
func waitAnalysed(ctx context.Context, t *bench.Target, limit time.Duration) error {
	idle := 0
	return poll(ctx, t, limit, func() (bool, error) {
		pending, err := sumMetric(ctx, t, "budgetd_analysis_pending_spans")
		if err != nil {
			return true, err
		}
		analysing, err := sumMetric(ctx, t, "budgetd_analysis_analysing_spans")
		if err != nil {
			return true, err
		}
		if held := pending + analysing; held > 0 {
			idle = 0
			return false, fmt.Errorf("%s still held %.0f spans for analysis after %s", t.Name, held, limit)
		}
		if idle++; idle == 2 {
			return true, nil
		}
		return false, fmt.Errorf("%s held no spans for analysis on only one read within %s", t.Name, limit)
	})
}

// poll reads budgetd's state every 200 ms until check is done, returning
// check's error when it is done with one, or its last error once limit has
// passed. At once for a target that is not budgetd.
func poll(ctx context.Context, t *bench.Target, limit time.Duration, check func() (done bool, err error)) error {
	if t.API == "" || t.AckMeansStored {
		return nil
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := check()
		if done {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// storedOf returns how many spans budgetd has stored so far; -1 for a
// target that stores nothing (the Collector to nop).
func storedOf(ctx context.Context, t *bench.Target) (float64, error) {
	if t.API == "" {
		return -1, nil
	}
	return sumMetric(ctx, t, "budgetd_wal_stored_spans_total")
}

// sumMetric adds a metric over the target's budgetd processes.
func sumMetric(ctx context.Context, t *bench.Target, name string) (float64, error) {
	total := 0.0
	for _, api := range t.APIs() {
		v, err := bench.Metric(ctx, api, name)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

func cpuOf(t *bench.Target) (time.Duration, error) {
	var total time.Duration
	for _, pid := range t.PIDs() {
		c, err := bench.CPUTime(pid)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

func print(out io.Writer, rounds [][]row, clients, spansPer int, rate float64) {
	paced := ""
	if rate > 0 {
		paced = fmt.Sprintf(", paced at %.0f spans/s", rate)
	}
	fmt.Fprintf(out, "\n%d clients, %d spans per request%s, %s\n\n", clients, spansPer, paced, machine())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tacked spans/s\tstored/s\tdrain s\tsustained vs collector\tCPU s / 1M sustained\tpeak RSS MiB\tGo heap MiB\tack p50 ms\tack p99 ms\trefused\t")
	var rows []row
	for _, round := range rounds {
		rows = append(rows, round...)
		var ceiling float64
		if c, ok := rowOf(round, "collector"); ok {
			ceiling = c.res.SpansPerSecond()
		}
		printRows(tw, round, ceiling)
	}
	tw.Flush()
	var lines []string
	for k, r := range rounds {
		for _, l := range ratios(r) {
			if len(rounds) > 1 {
				l = fmt.Sprintf("round %d, %s", k+1, l)
			}
			lines = append(lines, l)
		}
	}
	if len(rounds) > 1 {
		lines = append(lines, medians(rows)...)
	}
	lines = append(lines, againstBaseline(rows)...)
	if len(lines) > 0 {
		fmt.Fprintln(out)
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
}

// printRows writes a round's rows; ceiling is the round's Collector rate,
// 0 without one.
func printRows(tw io.Writer, rows []row, ceiling float64) {
	for _, r := range rows {
		if r.floorPerM > 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%.2f\t-\t-\t-\t-\t-\t  %s\n", r.name, r.floorPerM, r.note)
			continue
		}
		ratio := "-"
		if ceiling > 0 {
			ratio = fmt.Sprintf("%.0f %%", 100*r.sustained()/ceiling)
		}
		stored, drain := "-", "-"
		if r.stored >= 0 {
			stored = fmt.Sprintf("%.0f", r.stored/r.window().Seconds())
			drain = fmt.Sprintf("%.1f", r.drain.Seconds())
		}
		goMiB := "-"
		if r.goMiB > 0 {
			goMiB = fmt.Sprintf("%.0f", r.goMiB)
		}
		note := ""
		if r.note != "" {
			note = "  " + r.note
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%.2f\t%.0f\t%s\t%.1f\t%.1f\t%d\t%s\n", r.name, r.res.SpansPerSecond(), stored, drain, ratio, r.cpuPerMillion(), r.rssMiB, goMiB,
			float64(r.res.P50.Microseconds())/1000, float64(r.res.P99.Microseconds())/1000, r.res.Refused, note)
	}
}

// medians gives, per row name in the order they first ran, the median of
// its runs' sustained rate and CPU per stored span.
func medians(rows []row) []string {
	var names []string
	byName := make(map[string][]row)
	for _, r := range rows {
		if _, ok := byName[r.name]; !ok {
			names = append(names, r.name)
		}
		byName[r.name] = append(byName[r.name], r)
	}
	var lines []string
	for _, name := range names {
		runs := byName[name]
		cpu := median(runs, row.cpuPerMillion)
		if runs[0].floorPerM > 0 { // a cost, with no rate of its own
			lines = append(lines, fmt.Sprintf("%s, median of %d: %.2f CPU s / 1M", name, len(runs), cpu))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s, median of %d: %.0f spans/s sustained, %.2f CPU s / 1M", name, len(runs), median(runs, row.sustained), cpu))
	}
	return lines
}

// againstBaseline compares each budgetd target's runs with its runs on
// the baseline binary: the change of the medians of the sustained rate
// and of the CPU per stored span, and of the CPU pair by pair (the k-th
// run of each, which ran side by side).
func againstBaseline(rows []row) []string {
	var targets []string
	runs := make(map[string][]row)
	base := make(map[string][]row)
	for _, r := range rows {
		if r.baseline {
			base[r.target] = append(base[r.target], r)
			continue
		}
		if !isBudgetd(r.target) {
			continue
		}
		if _, ok := runs[r.target]; !ok {
			targets = append(targets, r.target)
		}
		runs[r.target] = append(runs[r.target], r)
	}
	var lines []string
	for _, t := range targets {
		now, was := runs[t], base[t]
		if len(was) == 0 || len(was) != len(now) {
			continue
		}
		var pairs []string
		for k := range now {
			pairs = append(pairs, change(now[k].cpuPerMillion(), was[k].cpuPerMillion()))
		}
		lines = append(lines, fmt.Sprintf("%s against its baseline: sustained %s (medians %.0f / %.0f), CPU per stored span %s (%.2f / %.2f); CPU pair by pair %s",
			now[0].name, change(median(now, row.sustained), median(was, row.sustained)), median(now, row.sustained), median(was, row.sustained),
			change(median(now, row.cpuPerMillion), median(was, row.cpuPerMillion)), median(now, row.cpuPerMillion), median(was, row.cpuPerMillion),
			strings.Join(pairs, ", ")))
	}
	return lines
}

// median is the median of f over rows (the mean of the middle two for an
// even count).
func median(rows []row, f func(row) float64) float64 {
	v := make([]float64, len(rows))
	for i, r := range rows {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// change writes now against was as a signed percentage.
func change(now, was float64) string {
	if was == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.0f %%", 100*(now/was-1))
}

// ratios compares each budgetd row with the peers present in the run: its
// stored spans/s with Jaeger's stored and the Collector's acknowledged
// rate, its CPU per stored span with the floor's.
func ratios(rows []row) []string {
	jaeger, hasJaeger := rowOf(rows, "jaeger")
	collector, hasCollector := rowOf(rows, "collector")
	floor, hasFloor := rowOf(rows, "floor")
	var lines []string
	for _, r := range rows {
		if r.target != "embedded" && r.target != "clickhouse" {
			continue
		}
		stored := r.sustained()
		var rates []string
		if hasJaeger && jaeger.sustained() > 0 {
			rates = append(rates, times(stored/jaeger.sustained())+" Jaeger's stored/s")
		}
		if hasCollector && collector.res.SpansPerSecond() > 0 {
			rates = append(rates, times(stored/collector.res.SpansPerSecond())+" the Collector's")
		}
		var parts []string
		if len(rates) > 0 {
			parts = append(parts, strings.Join(rates, ", "))
		}
		if hasFloor && floor.floorPerM > 0 {
			parts = append(parts, "CPU per stored span "+times(r.cpuPerMillion()/floor.floorPerM)+" the floor")
		}
		if len(parts) > 0 {
			lines = append(lines, r.name+": "+strings.Join(parts, "; "))
		}
	}
	return lines
}

// times writes a ratio with two significant digits, never in exponent form.
func times(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2g×", v)
}

func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	out, _ := exec.Command("nproc").Output()
	return fmt.Sprintf("%s cores of %s", strings.TrimSpace(string(out)), cpu)
}

// runQueries fills each of the named engines (embedded, clickhouse: a
// ClickHouse server it starts) with n spans and prints the query latencies
// and bytes per span, each query timed runs times; with ingest > 0, the
// latencies while ingest spans a second are written into the same store.
func runQueries(ctx context.Context, out io.Writer, n, ingest, runs int, names []string) error {
	work, err := os.MkdirTemp("", "budgetd-bench-q-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	type engine struct {
		name string
		open func() (*chsql.Store, error)
	}
	var engines []engine
	for _, name := range names {
		switch name {
		case "embedded":
			engines = append(engines, engine{"embedded (chDB 26.7)", func() (*chsql.Store, error) {
				return embedded.Open(ctx, embedded.Config{DataDir: filepath.Join(work, "chdb"), Database: "bench"})
			}})
		case "clickhouse":
			srv, err := clickhousetest.StartIn(filepath.Join(work, "clickhouse"))
			if err != nil {
				return err
			}
			defer srv.Stop()
			engines = append(engines, engine{"clickhouse-server 18.16", func() (*chsql.Store, error) {
				cfg := clickhouse.DefaultConfig()
				cfg.DSN = srv.DSN("bench")
				return clickhouse.Open(ctx, cfg)
			}})
		default:
			return fmt.Errorf("-query-engines: unknown engine %q (embedded, clickhouse)", name)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "engine\tspans\tload s\tingest spans/s\tbytes/span spans+index / all\ttrace by id p50/p99 ms\ttrace view p50/p99 ms\tfindings p50/p99 ms\tpaths 1h p50/p99 ms\tedges 1h p50/p99 ms\tproblems 1h p50/p99 ms\t\n")
	for _, e := range engines {
		st, err := e.open()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "filling %s with %d spans...\n", e.name, n)
		t0 := time.Now()
		if err := bench.Fill(ctx, st, n, 20_000); err != nil {
			st.Close()
			return err
		}
		load := time.Since(t0)
		var in *bench.Ingest
		if ingest > 0 {
			in = bench.StartIngest(ctx, st, ingest)
		}
		lat, err := bench.Queries(ctx, st, runs)
		kept := 0.0
		if in != nil { // stopped before the store closes
			_, rate, ingestErr := in.Stop()
			err = errors.Join(err, ingestErr)
			kept = rate
		}
		if err != nil {
			st.Close()
			return err
		}
		tables, err := bench.BytesPerSpan(ctx, st)
		st.Close()
		if err != nil {
			return err
		}
		bps, all := tables["spans"]+tables["trace_index"], 0.0
		var byTable []string
		for _, name := range slices.Sorted(maps.Keys(tables)) {
			all += tables[name]
			if tables[name] >= 0.05 {
				byTable = append(byTable, fmt.Sprintf("%s %.1f", name, tables[name]))
			}
		}
		ms := func(k string) string {
			return fmt.Sprintf("%.1f / %.1f", float64(lat[k][0].Microseconds())/1000, float64(lat[k][1].Microseconds())/1000)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.1f / %.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", e.name, n, load.Seconds(), kept, bps, all,
			ms("trace by id"), ms("trace view"), ms("findings first page"), ms("paths, 1 h"), ms("edges, 1 h"), ms("problems, 1 h"))
		// Also at once, so a failure on the next engine loses nothing.
		fmt.Fprintf(out, "%s: load %.0f s, ingest %.0f spans/s, %.1f / %.1f bytes/span, trace by id %s, trace view %s, findings %s, paths %s, edges %s, problems %s ms\n", e.name,
			load.Seconds(), kept, bps, all, ms("trace by id"), ms("trace view"), ms("findings first page"), ms("paths, 1 h"), ms("edges, 1 h"), ms("problems, 1 h"))
		fmt.Fprintf(out, "%s: bytes per span by table: %s\n", e.name, strings.Join(byTable, ", "))
	}
	return tw.Flush()
}
