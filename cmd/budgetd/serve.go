package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/budgetd/budgetd/app"
	"github.com/budgetd/budgetd/config"
	"github.com/budgetd/budgetd/memlimit"
)

// configFlags are the flags every command that reads the configuration has.
// They override the file, which overrides the defaults.
type configFlags struct {
	path   string
	values map[string]*string
	fs     *flag.FlagSet
}

// configFlagDefs are the settings that have flags, with where each goes.
var configFlagDefs = []struct {
	name, usage string
	set         func(*config.Config, string)
}{
	{"store.engine", "store engine: embedded (default) or clickhouse", func(c *config.Config, v string) { c.Store.Engine = v }},
	{"store.embedded.data-dir", "embedded engine data `dir` (default ./data)", func(c *config.Config, v string) { c.Store.Embedded.DataDir = v }},
	{"store.clickhouse.dsn", "ClickHouse `dsn`, clickhouse://host:9000/budgetd", func(c *config.Config, v string) { c.Store.ClickHouse.DSN = v }},
	{"log.level", "log `level`: debug, info, warn, error", func(c *config.Config, v string) { c.Log.Level = v }},
	{"api.endpoint", "REST API, /metrics and UI listen `address` (default localhost:8080)", func(c *config.Config, v string) { c.API.Endpoint = v }},
	{"api.pprof", "serve Go's profiler at /debug/pprof/ on the API listener: true or false", func(c *config.Config, v string) { c.API.Pprof = v == "true" }},
	{"ingest.grpc.endpoint", "OTLP/gRPC listen `address` (default localhost:4317; empty disables)", func(c *config.Config, v string) { c.Ingest.Server.GRPC.Endpoint = v }},
	{"ingest.http.endpoint", "OTLP/HTTP listen `address` (default localhost:4318; empty disables)", func(c *config.Config, v string) { c.Ingest.Server.HTTP.Endpoint = v }},
	{"ingest.durability.mode", "where spans are durable before the ack: wal (default) or batch", func(c *config.Config, v string) { c.Ingest.Durability.Mode = v }},
	{"ingest.durability.wal.dir", "write-ahead log `dir` (default <store.embedded.data-dir>/wal)", func(c *config.Config, v string) { c.Ingest.Durability.WAL.Dir = v }},
	{"ingest.durability.dead-letter-dir", "`dir` of the spans the store refuses (default <store.embedded.data-dir>/dead-letter)", func(c *config.Config, v string) { c.Ingest.Durability.DeadLetterDir = v }},
	{"ingest.auth.tokens-file", "`file` of bearer tokens OTLP senders must present, one per line (docs/security.md)", func(c *config.Config, v string) { c.Ingest.Server.Auth.TokensFile = v }},
	{"api.auth.tokens-file", "`file` of bearer tokens API clients must present, one per line (docs/security.md)", func(c *config.Config, v string) { c.API.Auth.TokensFile = v }},
	{"follow.otel-traces.source", "also follow the Collector ClickHouse exporter's table at `source` (clickhouse://host:9000/DATABASE or a chDB data directory) and analyse its traces as they arrive (docs/formats.md)", func(c *config.Config, v string) { c.Follow.OTelTraces.Source = v }},
	{"follow.otel-traces.table", "the followed exporter `table`, TABLE or DATABASE.TABLE (default otel_traces)", func(c *config.Config, v string) { c.Follow.OTelTraces.Table = v }},
}

func addConfigFlags(fs *flag.FlagSet) *configFlags {
	f := &configFlags{fs: fs, values: map[string]*string{}}
	fs.StringVar(&f.path, "config", "", "YAML configuration `file` (see docs/configuration.md)")
	for _, d := range configFlagDefs {
		f.values[d.name] = fs.String(d.name, "", d.usage)
	}
	return f
}

// load builds the configuration: defaults, then the file, then set flags.
func (f *configFlags) load() (config.Config, error) {
	cfg := config.DefaultConfig()
	if f.path != "" {
		var err error
		if cfg, err = config.Load(f.path); err != nil {
			return cfg, err
		}
	}
	f.fs.Visit(func(fl *flag.Flag) {
		for _, d := range configFlagDefs {
			if d.name == fl.Name {
				d.set(&cfg, *f.values[d.name])
			}
		}
	})
	return cfg, cfg.Validate()
}

func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	lvl, _ := cfg.SlogLevel() // validated
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// shutdownTimeout bounds a graceful stop: in-flight requests finish, the
// write-ahead log drains and held traces are analysed within it. Whatever
// the log still holds after it is stored at the next start.
const shutdownTimeout = 30 * time.Second

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: budgetd serve [flags]\n\nReceive OTLP traces, store them and find budget violations. Flags override the config file.\n\nFlags:")
		fs.PrintDefaults()
	}
	flags := addConfigFlags(fs)
	demo := fs.Bool("demo", false, "load the example scenarios (fixtures) at start, so the API and UI show findings at once")
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return err
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	limit := memlimit.Choose(os.Getenv("GOMEMLIMIT"), cfg.Memory.GoLimitBytes, memlimit.Bounds{
		Assembly: cfg.Analyze.Stream.Assembly.MaxBytes,
		InFlight: cfg.Ingest.Server.MaxInFlightBytes,
		Batch:    int64(cfg.Ingest.Durability.WAL.BatchBytes),
		Dedup:    cfg.Ingest.Durability.Dedup.TableBytes(),
	}, memlimit.MachineBytes())
	previous := memlimit.Apply(limit)
	defer memlimit.Apply(memlimit.Choice{Bytes: previous, Source: "restore"}) // serve runs in process in tests
	log.Info("go memory limit", "bytes", debug.SetMemoryLimit(-1), "source", limit.Source, "why", limit.Why)
	gc := memlimit.ChooseGCPercent(os.Getenv("GOGC"), cfg.Memory.GCPercent)
	previousGC := memlimit.ApplyGC(gc)
	defer memlimit.ApplyGC(memlimit.GCChoice{Percent: previousGC, Source: "restore"})
	log.Info("go gc percent", "percent", memlimit.GCPercent(), "source", gc.Source)

	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	if *demo {
		n, err := loadDemo(ctx, a.Store(), a.Analysis(), time.Now())
		if err != nil {
			_ = a.Shutdown(context.Background())
			return err
		}
		log.Info("demo scenarios loaded", "spans", n)
	}

	<-ctx.Done()
	log.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return a.Shutdown(stopCtx)
}
