// Package config is budgetd's configuration as users write it: a YAML file
// whose sections belong to the packages that use them, defaults for every
// key, and validation whose messages name the offending key.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/api"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/otelfollow"
	"github.com/budgetd/budgetd/pipeline"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/store/engine"
	"github.com/budgetd/budgetd/store/oteltraces"
)

// Config is the whole configuration file.
type Config struct {
	Log      LogConfig       `yaml:"log"`
	Store    engine.Config   `yaml:"store"`
	Analyze  AnalyzeConfig   `yaml:"analyze"`
	API      api.Config      `yaml:"api"`
	Ingest   IngestConfig    `yaml:"ingest"`
	Problems problems.Config `yaml:"problems"`
	Memory   MemoryConfig    `yaml:"memory"`
	Follow   FollowConfig    `yaml:"follow"`
}

// FollowConfig is the `follow` section: tables of other tools that `serve`
// follows and analyses as their rows arrive, besides what OTLP brings.
type FollowConfig struct {
	// OTelTraces follows the Collector ClickHouse exporter's otel_traces
	// table (package otelfollow); off unless its source is set.
	OTelTraces otelfollow.Config `yaml:"otel_traces"`
}

// validateFollow checks the followed sources against the store: a chDB source
// must be the embedded store's own data directory, since chDB runs one
// engine per process.
func (c Config) validateFollow() error {
	f := c.Follow.OTelTraces
	if err := f.Validate(); err != nil || !f.Enabled() {
		return err
	}
	src, err := oteltraces.ParseSource(f.Source, f.Table)
	if err != nil || src.Engine.Engine != engine.Embedded || c.Store.Engine != engine.Embedded {
		return err
	}
	have, err1 := filepath.Abs(src.Engine.Embedded.DataDir)
	want, err2 := filepath.Abs(c.Store.Embedded.DataDir)
	if err1 != nil || err2 != nil || have != want {
		return fmt.Errorf("follow.otel_traces.source %s is a chDB directory other than store.embedded.data_dir %s: one process runs one chDB engine, so follow a ClickHouse server or the store's own directory",
			f.Source, c.Store.Embedded.DataDir)
	}
	return nil
}

// MemoryConfig is the `memory` section: Go's soft memory limit and its
// collector's percent for `budgetd serve` (package memlimit). GOMEMLIMIT
// and GOGC in the environment override them.
type MemoryConfig struct {
	// GoLimitBytes is the limit in bytes: 0 derives it from the
	// configuration's bounds (memlimit.Choose), -1 sets none.
	GoLimitBytes int64 `yaml:"go_limit_bytes"`
	// GCPercent is GOGC: how far the heap may grow past the live heap
	// before a collection, in percent. 0 chooses memlimit.DefaultGCPercent,
	// -1 turns it off (then only the limit starts a collection).
	GCPercent int `yaml:"gc_percent"`
}

// minGoLimitBytes is the least explicit limit accepted: below it Go would
// collect continuously whatever the load.
const minGoLimitBytes = 64 << 20

// Validate checks memory.go_limit_bytes and memory.gc_percent.
func (m MemoryConfig) Validate() error {
	if m.GoLimitBytes < -1 || (m.GoLimitBytes > 0 && m.GoLimitBytes < minGoLimitBytes) {
		return fmt.Errorf("memory.go_limit_bytes must be -1 (none), 0 (derived) or at least %d, not %d", minGoLimitBytes, m.GoLimitBytes)
	}
	if m.GCPercent < -1 {
		return fmt.Errorf("memory.gc_percent must be -1 (off), 0 (budgetd's default) or a percent, not %d", m.GCPercent)
	}
	if m.GCPercent == -1 && m.GoLimitBytes == -1 {
		// Go would never collect: the heap would grow until the process
		// is killed.
		return fmt.Errorf("memory.gc_percent -1 (off) needs a memory limit, and memory.go_limit_bytes is -1 (none)")
	}
	return nil
}

// IngestConfig is the `ingest` section: the OTLP receivers, and the write
// path that makes spans durable before they are acknowledged.
type IngestConfig struct {
	Server     ingest.Config  `yaml:",inline"`
	Durability durable.Config `yaml:"durability"`
}

// AnalyzeConfig is the `analyze` section: the detectors' settings and the
// streaming assembly around them, side by side in one YAML mapping.
type AnalyzeConfig struct {
	Detect analyze.Config  `yaml:",inline"`
	Stream pipeline.Config `yaml:",inline"`
}

// LogConfig is the `log` section.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// DefaultConfig returns budgetd's defaults: the embedded store under ./data.
func DefaultConfig() Config {
	return Config{
		Log:      LogConfig{Level: "info", Format: "text"},
		Store:    engine.DefaultConfig(),
		Analyze:  AnalyzeConfig{Detect: analyze.DefaultConfig(), Stream: pipeline.DefaultConfig()},
		API:      api.DefaultConfig(),
		Ingest:   IngestConfig{Server: ingest.DefaultConfig(), Durability: defaultDurability()},
		Problems: problems.DefaultConfig(),
		Follow:   FollowConfig{OTelTraces: otelfollow.DefaultConfig()},
	}
}

// defaultDurability leaves the log's and the dead letter's directories
// empty: they then follow the embedded store's data directory (see
// WithDerived).
func defaultDurability() durable.Config {
	c := durable.DefaultConfig()
	c.WAL.Dir, c.DeadLetterDir = "", ""
	return c
}

// WithDerived fills the settings whose defaults follow other settings:
// ingest.durability.wal.dir defaults to <store.embedded.data_dir>/wal and
// ingest.durability.dead_letter_dir to <store.embedded.data_dir>/dead-letter.
func (c Config) WithDerived() Config {
	d := &c.Ingest.Durability
	if d.WAL.Dir == "" {
		d.WAL.Dir = filepath.Join(c.Store.Embedded.DataDir, "wal")
	}
	if d.DeadLetterDir == "" {
		d.DeadLetterDir = filepath.Join(c.Store.Embedded.DataDir, "dead-letter")
	}
	return c
}

// Validate reports the first invalid section, naming the offending keys.
func (c Config) Validate() error {
	if _, err := c.Log.SlogLevel(); err != nil {
		return err
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fmt.Errorf("log.format must be text or json, not %q", c.Log.Format)
	}
	if err := c.Store.Validate(); err != nil {
		return err
	}
	if err := c.Analyze.Detect.Validate(); err != nil {
		return err
	}
	if err := c.Analyze.Stream.Validate(); err != nil {
		return err
	}
	if err := c.API.Validate(); err != nil {
		return err
	}
	if err := c.Ingest.Server.Validate(); err != nil {
		return err
	}
	if err := c.Problems.Validate(); err != nil {
		return err
	}
	if err := c.Memory.Validate(); err != nil {
		return err
	}
	if err := c.validateFollow(); err != nil {
		return err
	}
	return c.WithDerived().Ingest.Durability.Validate()
}

// SlogLevel parses log.level.
func (l LogConfig) SlogLevel() (slog.Level, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.Level)); err != nil {
		return 0, fmt.Errorf("log.level must be debug, info, warn or error, not %q", l.Level)
	}
	return lvl, nil
}

// Load reads a YAML file over the defaults. Unknown keys are errors, so a
// misspelt setting is not silently ignored.
func Load(path string) (Config, error) {
	cfg := DefaultConfig()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty file decodes to io.EOF and means "all defaults".
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("parse config %s: %w%s", path, err, movedKeyHint(err))
	}
	return cfg, nil
}

// movedKeyHint points a file written for an older budgetd at the keys'
// new place: the write path's settings moved under ingest.durability.
func movedKeyHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "field wal not found in type config.IngestConfig"),
		strings.Contains(msg, "field batch not found in type config.IngestConfig"):
		return " (ingest.wal and ingest.batch moved to ingest.durability.wal and ingest.durability.batch; docs/configuration.md)"
	case strings.Contains(msg, "into durable.Config"):
		return " (ingest.durability is a section now: write `durability: {mode: wal}`; docs/configuration.md)"
	}
	return ""
}
