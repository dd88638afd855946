package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/api"
	"github.com/budgetd/budgetd/config"
	"github.com/budgetd/budgetd/pipeline"
	"github.com/budgetd/budgetd/store/engine"
)

// configFlags are the flags every command that reads the configuration has.
// They override the file, which overrides the defaults.
type configFlags struct {
	path     string
	engine   string
	dataDir  string
	dsn      string
	logLevel string
	apiAddr  string
	fs       *flag.FlagSet
}

func addConfigFlags(fs *flag.FlagSet) *configFlags {
	f := &configFlags{fs: fs}
	fs.StringVar(&f.path, "config", "", "YAML configuration `file` (see docs/configuration.md)")
	fs.StringVar(&f.engine, "store.engine", "", "store engine: embedded (default) or clickhouse")
	fs.StringVar(&f.dataDir, "store.embedded.data-dir", "", "embedded engine data `dir` (default ./data)")
	fs.StringVar(&f.dsn, "store.clickhouse.dsn", "", "ClickHouse `dsn`, clickhouse://host:9000/budgetd")
	fs.StringVar(&f.logLevel, "log.level", "", "log `level`: debug, info, warn, error")
	fs.StringVar(&f.apiAddr, "api.endpoint", "", "REST API and UI listen `address` (default localhost:8080)")
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
		switch fl.Name {
		case "store.engine":
			cfg.Store.Engine = f.engine
		case "store.embedded.data-dir":
			cfg.Store.Embedded.DataDir = f.dataDir
		case "store.clickhouse.dsn":
			cfg.Store.ClickHouse.DSN = f.dsn
		case "log.level":
			cfg.Log.Level = f.logLevel
		case "api.endpoint":
			cfg.API.Endpoint = f.apiAddr
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

// shutdownTimeout bounds a graceful stop: in-flight requests finish and held
// traces are analysed within it.
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	st, err := engine.Open(ctx, cfg.Store)
	if err != nil {
		return fmt.Errorf("open %s store: %w", cfg.Store.Engine, err)
	}
	defer st.Close()
	applied, _, err := st.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	log.Info("store ready", "engine", cfg.Store.Engine, "database", st.Database(), "schema_version", applied)

	analysis, err := pipeline.New(cfg.Analyze.Stream, pipeline.Settings{
		Logger: log, Store: st, Analyzer: analyze.New(cfg.Analyze.Detect), Registerer: reg,
	})
	if err != nil {
		return err
	}
	analysis.Start()
	if *demo {
		n, err := loadDemo(ctx, st, analysis, time.Now())
		if err != nil {
			return err
		}
		log.Info("demo scenarios loaded", "spans", n)
	}

	apiServer, err := api.New(cfg.API, api.Settings{Logger: log, Store: st, Gatherer: reg, Registerer: reg})
	if err != nil {
		return err
	}
	if err := apiServer.Start(); err != nil {
		return err
	}
	log.Info("api listening", "addr", apiServer.Addr())

	<-ctx.Done()
	log.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	// Order matters: stop taking spans, analyse what is held, then stop
	// answering queries about it.
	return errors.Join(analysis.Shutdown(stopCtx), apiServer.Shutdown(stopCtx))
}
