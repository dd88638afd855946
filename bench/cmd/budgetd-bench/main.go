// Command budgetd-bench loads the OpenTelemetry Collector (otlp → nop) and
// budgetd (embedded store, and a ClickHouse server) with the same OTLP load
// on this machine, one after the other, and prints a comparison table.
//
//	go run ./bench/cmd/budgetd-bench [-duration 30s] [-clients 8]
//
// `make bench-compare` builds what it needs and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/budgetd/budgetd/bench"
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
	name   string
	res    bench.Result
	cpu    time.Duration
	rssMiB float64
	stored float64 // spans budgetd stored in the measured window; -1 for the Collector
	goMiB  float64 // heap Go holds at the end (budgetd); 0 for the Collector
	note   string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("budgetd-bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 30*time.Second, "measured load `period` per target")
	warmup := fs.Duration("warmup", 5*time.Second, "unmeasured load `period` before it")
	clients := fs.Int("clients", 8, "concurrent senders")
	spansPer := fs.Int("spans-per-request", 1000, "spans in one export request")
	distinct := fs.Int("requests", 200, "distinct pre-built requests, sent round-robin")
	targets := fs.String("targets", "collector,embedded,clickhouse", "comma-separated targets to load")
	budgetdBin := fs.String("budgetd", "bin/budgetd", "budgetd `binary`")
	otelcolBin := fs.String("otelcol", ".cache/otelcol/otelcol-budgetd", "Collector `binary` (make test-setup builds it)")
	profile := fs.String("profile", "", "write each budgetd target's CPU profile of the measured window and its heap profile at the end into this `directory`")
	querySpans := fs.Int("query-spans", 0, "instead of loading: fill each store engine with this many `spans` and time the API's queries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *querySpans > 0 {
		return runQueries(ctx, out, *querySpans)
	}
	// Targets run in their own directories: binaries must be absolute.
	for _, p := range []*string{budgetdBin, otelcolBin} {
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

	fmt.Fprintf(out, "building %d requests of %d spans...\n", *distinct, *spansPer)
	load := bench.Requests(*distinct, *spansPer)

	var rows []row
	for _, name := range strings.Split(*targets, ",") {
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		var t *bench.Target
		var extra []string
		if *profile != "" {
			extra = []string{"--api.pprof", "true"}
		}
		switch name {
		case "collector":
			t, err = bench.StartCollector(ctx, *otelcolBin, dir)
		case "embedded":
			t, err = bench.StartBudgetd(ctx, *budgetdBin, dir, "budgetd embedded", extra...)
		case "clickhouse":
			srv, serr := clickhousetest.StartIn(filepath.Join(dir, "clickhouse"))
			if serr != nil {
				return serr
			}
			t, err = bench.StartBudgetd(ctx, *budgetdBin, dir, "budgetd clickhouse-server 18.16",
				append(extra, "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("budgetd"))...)
			if err == nil {
				t.SetExtra(srv.PID, srv.Stop)
			} else {
				_ = srv.Stop()
			}
		default:
			return fmt.Errorf("unknown target %q", name)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "loading %s for %s...\n", t.Name, *warmup+*duration)
		var prof string
		if *profile != "" && t.API != "" {
			prof = filepath.Join(*profile, name)
		}
		r, err := measure(ctx, t, load, *spansPer, *clients, *warmup, *duration, prof)
		if serr := t.Stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	print(out, rows, *clients, *spansPer)
	return nil
}

// measure warms the target up, then drives it for duration while reading
// its processes' CPU time at both ends of the measured window. With a
// profile path prefix it also records budgetd's CPU profile over the
// window (prefix.cpu.pprof) and its heap at the end (prefix.heap.pprof).
func measure(ctx context.Context, t *bench.Target, load *bench.Load, spansPer, clients int, warmup, duration time.Duration, profile string) (row, error) {
	if _, err := bench.Drive(ctx, t.Endpoint, load, spansPer, clients, 0, warmup); err != nil {
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
	res, err := bench.Drive(ctx, t.Endpoint, load, spansPer, clients, 0, duration)
	if perr := <-profDone; err == nil {
		err = perr
	}
	if err == nil && profile != "" {
		err = bench.SaveProfile(ctx, t.API, "heap", profile+".heap.pprof")
	}
	if err != nil {
		return row{}, err
	}
	cpu1, err := cpuOf(t)
	if err != nil {
		return row{}, err
	}
	stored1, err := storedOf(ctx, t)
	if err != nil {
		return row{}, err
	}
	var goMiB float64
	if t.API != "" {
		// Heap memory Go holds from the OS and has not returned: its part
		// of the RSS, give or take stacks and runtime structures.
		sys, err := bench.Metric(ctx, t.API, "go_memstats_heap_sys_bytes")
		if err != nil {
			return row{}, err
		}
		released, err := bench.Metric(ctx, t.API, "go_memstats_heap_released_bytes")
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
	if t.API == "" {
		stored = -1
	}
	return row{name: t.Name, res: res, cpu: cpu1 - cpu0, rssMiB: float64(rss) / (1 << 20), stored: stored, goMiB: goMiB}, nil
}

// storedOf returns how many spans budgetd has stored so far; -1 for a
// target that stores nothing (the Collector to nop).
func storedOf(ctx context.Context, t *bench.Target) (float64, error) {
	if t.API == "" {
		return -1, nil
	}
	return bench.Metric(ctx, t.API, "budgetd_wal_stored_spans_total")
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

func print(out io.Writer, rows []row, clients, spansPer int) {
	fmt.Fprintf(out, "\n%d clients, %d spans per request, %s\n\n", clients, spansPer, machine())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tacked spans/s\tstored/s\tsustained vs collector\tCPU s / 1M sustained\tpeak RSS MiB\tGo heap MiB\tack p50 ms\tack p99 ms\trefused\t")
	var ceiling float64
	for _, r := range rows {
		if strings.HasPrefix(r.name, "otelcol") {
			ceiling = r.res.SpansPerSecond()
		}
	}
	for _, r := range rows {
		ratio := "-"
		// budgetd's sustained rate is what it stores: what it acknowledges
		// beyond that only fills its write-ahead log, until the log is full.
		sustained := r.res.SpansPerSecond()
		if r.stored >= 0 {
			sustained = min(sustained, r.stored/r.res.Elapsed.Seconds())
		}
		if ceiling > 0 {
			ratio = fmt.Sprintf("%.0f %%", 100*sustained/ceiling)
		}
		perM := 0.0
		if sustained > 0 {
			perM = r.cpu.Seconds() / (sustained * r.res.Elapsed.Seconds() / 1e6)
		}
		stored := "-"
		if r.stored >= 0 {
			stored = fmt.Sprintf("%.0f", r.stored/r.res.Elapsed.Seconds())
		}
		goMiB := "-"
		if r.goMiB > 0 {
			goMiB = fmt.Sprintf("%.0f", r.goMiB)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%.2f\t%.0f\t%s\t%.1f\t%.1f\t%d\t\n", r.name, r.res.SpansPerSecond(), stored, ratio, perM, r.rssMiB, goMiB,
			float64(r.res.P50.Microseconds())/1000, float64(r.res.P99.Microseconds())/1000, r.res.Refused)
	}
	tw.Flush()
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

// runQueries fills the embedded store and a ClickHouse server with n spans
// each and prints the query latencies and bytes per span.
func runQueries(ctx context.Context, out io.Writer, n int) error {
	work, err := os.MkdirTemp("", "budgetd-bench-q-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	srv, err := clickhousetest.StartIn(filepath.Join(work, "clickhouse"))
	if err != nil {
		return err
	}
	defer srv.Stop()
	engines := []struct {
		name string
		open func() (*chsql.Store, error)
	}{
		{"embedded (chDB 26.7)", func() (*chsql.Store, error) {
			return embedded.Open(ctx, embedded.Config{DataDir: filepath.Join(work, "chdb"), Database: "bench"})
		}},
		{"clickhouse-server 18.16", func() (*chsql.Store, error) {
			cfg := clickhouse.DefaultConfig()
			cfg.DSN = srv.DSN("bench")
			return clickhouse.Open(ctx, cfg)
		}},
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "engine\tspans\tload s\tbytes/span\ttrace by id p50/p99 ms\tfindings p50/p99 ms\tpaths 1h p50/p99 ms\tedges 1h p50/p99 ms\t\n")
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
		lat, err := bench.Queries(ctx, st, 21)
		if err != nil {
			st.Close()
			return err
		}
		bps, err := bench.BytesPerSpan(ctx, st)
		st.Close()
		if err != nil {
			return err
		}
		ms := func(k string) string {
			return fmt.Sprintf("%.1f / %.1f", float64(lat[k][0].Microseconds())/1000, float64(lat[k][1].Microseconds())/1000)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t\n", e.name, n, load.Seconds(), bps,
			ms("trace by id"), ms("findings first page"), ms("paths, 1 h"), ms("edges, 1 h"))
		// Also at once, so a failure on the next engine loses nothing.
		fmt.Fprintf(out, "%s: load %.0f s, %.1f bytes/span, trace by id %s, findings %s, paths %s, edges %s ms\n", e.name,
			load.Seconds(), bps, ms("trace by id"), ms("findings first page"), ms("paths, 1 h"), ms("edges, 1 h"))
	}
	return tw.Flush()
}
