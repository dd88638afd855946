// Package app wires budgetd's server together from its configuration: the
// store, the durability point (write-ahead log or direct batches), the OTLP
// receivers, the streaming analysis and the API. `budgetd serve` is a thin
// shell around it, and tests start the same wiring in process.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/api"
	"github.com/budgetd/budgetd/config"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/otelfollow"
	"github.com/budgetd/budgetd/pipeline"
	"github.com/budgetd/budgetd/problems/watch"
	"github.com/budgetd/budgetd/security"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/engine"
)

// App is a running budgetd server.
type App struct {
	log      *slog.Logger
	store    *chsql.Store
	analysis *pipeline.Pipeline
	ingest   *ingest.Server
	follower *otelfollow.Follower // nil unless follow.otel_traces is set
	api      *api.Server
	registry *prometheus.Registry
	// stopWatch ends the problems watch and waits for it.
	stopWatch func()
}

// Start opens the store, replays the write-ahead log and starts every
// listener. On error everything started so far is stopped again.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *App, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDerived()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// a is not the named result: a failed Start returns nil, and the
	// cleanup below still closes what a holds.
	a := &App{log: log, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var cleanup []func(context.Context) error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				_ = cleanup[i](context.Background())
			}
		}
	}()

	if a.store, err = engine.Open(ctx, cfg.Store); err != nil {
		return nil, fmt.Errorf("open %s store: %w", cfg.Store.Engine, err)
	}
	cleanup = append(cleanup, func(context.Context) error { return a.store.Close() })
	applied, _, err := a.store.SchemaVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	log.Info("store ready", "engine", cfg.Store.Engine, "database", a.store.Database(), "schema_version", applied)

	a.analysis, err = pipeline.New(cfg.Analyze.Stream, pipeline.Settings{
		Logger: log, Store: a.store, Analyzer: analyze.New(cfg.Analyze.Detect), Registerer: a.registry, Problems: &cfg.Problems,
	})
	if err != nil {
		return nil, err
	}
	a.analysis.Start()
	cleanup = append(cleanup, a.analysis.Shutdown)

	// The write path stores what ingest accepts and hands it to the
	// analysis: after each store write, replays after a restart included.
	dur, err := durable.Open(cfg.Ingest.Durability, durable.Settings{Logger: log, Store: a.store, Sink: a.analysis, Registerer: a.registry})
	if err != nil {
		return nil, err
	}
	a.ingest, err = ingest.New(cfg.Ingest.Server, ingest.Settings{Logger: log, Durability: dur, Registerer: a.registry})
	if err != nil {
		_ = dur.Shutdown(ctx)
		return nil, err
	}
	if err := a.ingest.Start(ctx); err != nil {
		_ = a.ingest.Shutdown(ctx)
		return nil, err
	}
	cleanup = append(cleanup, a.ingest.Shutdown)

	// A followed table's spans take the OTLP requests' write path: stored,
	// deduplicated and analysed the same way.
	if fc := cfg.Follow.OTelTraces; fc.Enabled() {
		a.follower, err = otelfollow.New(fc, otelfollow.Settings{Logger: log, Durability: dur, Store: a.store,
			Limits: cfg.Ingest.Server.Limits, Registerer: a.registry})
		if err != nil {
			return nil, err
		}
		a.follower.Start()
		cleanup = append(cleanup, a.follower.Shutdown)
	}

	warnings := exposureWarnings(cfg)
	if cfg.API.Pprof {
		warnings = append(warnings, "api.pprof is on: /debug/pprof/ serves profiles and the process's command line to any API token holder")
	}
	for _, w := range warnings {
		log.Warn("check the configuration", "warning", w)
	}
	a.api, err = api.New(cfg.API, api.Settings{Logger: log, Store: a.store, Gatherer: a.registry, Registerer: a.registry,
		Ready: []func() error{dur.Stalled}, Warnings: warnings, Problems: &cfg.Problems})
	if err != nil {
		return nil, err
	}
	watcher, err := watch.New(cfg.Problems, watch.Settings{Logger: log, Store: a.store, Registerer: a.registry})
	if err != nil {
		return nil, err
	}
	watchCtx, cancelWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() { defer close(watched); watcher.Run(watchCtx) }()
	a.stopWatch = func() { cancelWatch(); <-watched }
	cleanup = append(cleanup, func(context.Context) error { a.stopWatch(); return nil })
	if err := a.api.Start(); err != nil {
		return nil, err
	}
	log.Info("api listening", "addr", a.api.Addr())
	return a, nil
}

// exposureWarnings names every listener open to other hosts without bearer
// tokens or TLS.
func exposureWarnings(cfg config.Config) []string {
	in := cfg.Ingest.Server
	var out []string
	for _, l := range []security.Listener{
		{Name: "ingest.grpc", Endpoint: in.GRPC.Endpoint, Auth: in.Auth, AuthKey: "ingest.auth", TLS: in.GRPC.TLS, TLSKey: "ingest.grpc.tls"},
		{Name: "ingest.http", Endpoint: in.HTTP.Endpoint, Auth: in.Auth, AuthKey: "ingest.auth", TLS: in.HTTP.TLS, TLSKey: "ingest.http.tls"},
		{Name: "api", Endpoint: cfg.API.Endpoint, Auth: cfg.API.Auth.AuthConfig, AuthKey: "api.auth", TLS: cfg.API.TLS, TLSKey: "api.tls"},
	} {
		if w := security.ExposureWarning(l); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Shutdown stops in dependency order: stop taking spans (the follower
// first, then ingest, which drains its requests and its durability),
// analyse what is held, stop answering queries and watching problems,
// close the store.
func (a *App) Shutdown(ctx context.Context) error {
	var followErr error
	if a.follower != nil {
		followErr = a.follower.Shutdown(ctx)
	}
	err := errors.Join(
		followErr,
		a.ingest.Shutdown(ctx),
		a.analysis.Shutdown(ctx),
		a.api.Shutdown(ctx),
	)
	a.stopWatch()
	return errors.Join(err, a.store.Close())
}

// IngestAddrs returns the OTLP listeners' addresses (nil when disabled).
func (a *App) IngestAddrs() (grpc, http net.Addr) { return a.ingest.Addrs() }

// APIAddr returns the API's address.
func (a *App) APIAddr() string { return a.api.Addr() }

// Store returns the store.
func (a *App) Store() *chsql.Store { return a.store }

// Analysis returns the streaming analysis (for Flush in tests and --demo).
func (a *App) Analysis() *pipeline.Pipeline { return a.analysis }
