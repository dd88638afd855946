package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultsAreValid(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		check   func(*testing.T, Config)
		wantErr string
	}{
		{name: "empty file is the defaults", yaml: "", check: func(t *testing.T, c Config) { require.Equal(t, DefaultConfig(), c) }},
		{name: "every section", yaml: "log: {level: debug}\nstore: {engine: clickhouse, clickhouse: {dsn: 'clickhouse://h:9000/x'}}\n" +
			"analyze: {skew_tolerance_ms: 7, assembly: {idle: 3s}, tick: 2s}\n",
			check: func(t *testing.T, c Config) {
				require.Equal(t, "debug", c.Log.Level)
				require.Equal(t, "clickhouse://h:9000/x", c.Store.ClickHouse.DSN)
				require.InDelta(t, 7, c.Analyze.Detect.SkewToleranceMs, 0)
				require.Equal(t, 3*time.Second, c.Analyze.Stream.Assembly.Idle)
				require.Equal(t, 2*time.Second, c.Analyze.Stream.Tick)
				require.Equal(t, DefaultConfig().Analyze.Stream.Assembly.MaxWait, c.Analyze.Stream.Assembly.MaxWait, "unset keys keep defaults")
			}},
		{name: "inference", yaml: "analyze: {infer: {min_samples: 9}}\n",
			check: func(t *testing.T, c Config) {
				require.Equal(t, 9, c.Analyze.Detect.Infer.MinSamples)
				require.True(t, c.Analyze.Detect.Infer.Enabled, "unset keys keep defaults")
				require.InDelta(t, 0.5, c.Analyze.Detect.Infer.MinConfidence, 0)
			}},
		{name: "inference off", yaml: "analyze: {infer: {enabled: false}}\n",
			check: func(t *testing.T, c Config) { require.False(t, c.Analyze.Detect.Infer.Enabled) }},
		{name: "unknown key", yaml: "analyze: {tik: 1s}\n", wantErr: "field tik not found"},
		{name: "write path", yaml: "ingest: {durability: {mode: batch, max_backoff: 1s, batch: {queue_spans: 10}, wal: {batch_spans: 7}}}\n",
			check: func(t *testing.T, c Config) {
				d := c.Ingest.Durability
				require.Equal(t, "batch", d.Mode)
				require.Equal(t, time.Second, d.MaxBackoff)
				require.Equal(t, 10, d.Batch.QueueSpans)
				require.Equal(t, 7, d.WAL.BatchSpans)
				require.Equal(t, DefaultConfig().Ingest.Durability.WriteTimeout, d.WriteTimeout, "unset keys keep defaults")
			}},
		{name: "cluster", yaml: "store: {engine: clickhouse, clickhouse: {dsn: 'clickhouse://h1:9000,h2:9000/x', cluster: c1}}\n",
			check: func(t *testing.T, c Config) { require.Equal(t, "c1", c.Store.ClickHouse.Cluster) }},
		{name: "memory", yaml: "memory: {go_limit_bytes: 1073741824, gc_percent: 80}\n",
			check: func(t *testing.T, c Config) {
				require.Equal(t, int64(1<<30), c.Memory.GoLimitBytes)
				require.Equal(t, 80, c.Memory.GCPercent)
			}},
		{name: "follow", yaml: "follow: {otel_traces: {source: 'clickhouse://h:9000/otel', settle: 30s, max_spans_per_poll: 7}}\n",
			check: func(t *testing.T, c Config) {
				f := c.Follow.OTelTraces
				require.Equal(t, "clickhouse://h:9000/otel", f.Source)
				require.Equal(t, 30*time.Second, f.Settle)
				require.Equal(t, 7, f.MaxSpansPerPoll)
				require.Equal(t, "otel_traces", f.Table, "unset keys keep defaults")
				require.NoError(t, c.Validate())
			}},
		{name: "the old durability string", yaml: "ingest: {durability: batch}\n", wantErr: "ingest.durability is a section now"},
		{name: "the old wal section", yaml: "ingest: {wal: {dir: /x}}\n", wantErr: "ingest.wal and ingest.batch moved to ingest.durability.wal"},
		{name: "the old batch section", yaml: "ingest: {batch: {max_spans: 1}}\n", wantErr: "moved to ingest.durability"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			require.NoError(t, os.WriteFile(p, []byte(tt.yaml), 0o600))
			c, err := Load(p)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestValidateNamesKeys(t *testing.T) {
	c := DefaultConfig()
	c.Memory.GoLimitBytes = 1000
	require.ErrorContains(t, c.Validate(), "memory.go_limit_bytes must be -1 (none), 0 (derived) or at least 67108864, not 1000")
	c = DefaultConfig()
	c.Memory.GCPercent = -2
	require.ErrorContains(t, c.Validate(), "memory.gc_percent must be -1 (off), 0 (budgetd's default) or a percent, not -2")
	c = DefaultConfig()
	c.Memory.GCPercent, c.Memory.GoLimitBytes = -1, -1
	require.ErrorContains(t, c.Validate(), "memory.gc_percent -1 (off) needs a memory limit")
	c.Memory.GoLimitBytes = 0
	require.NoError(t, c.Validate(), "off, with the derived limit")
	c = DefaultConfig()
	c.Analyze.Stream.Assembly.MaxTraces = 0
	require.ErrorContains(t, c.Validate(), "analyze.assembly.max_traces must be > 0")
	c = DefaultConfig()
	c.Analyze.Detect.SkewToleranceMs = -1
	require.ErrorContains(t, c.Validate(), "analyze.skew_tolerance_ms must be >= 0")
	c = DefaultConfig()
	c.Analyze.Detect.Infer.MinConfidence = 1.5
	require.ErrorContains(t, c.Validate(), "analyze.infer.min_confidence must be between 0 and 1")
	c = DefaultConfig()
	c.Analyze.Detect.Infer.MinSamples = 0
	require.ErrorContains(t, c.Validate(), "analyze.infer.min_samples must be >= 1")
	c = DefaultConfig()
	c.Ingest.Durability.Mode = "tape"
	require.ErrorContains(t, c.Validate(), `ingest.durability.mode must be "wal" or "batch", not "tape"`)
	c = DefaultConfig()
	c.Ingest.Durability.WAL.StallAfter = 0
	require.ErrorContains(t, c.Validate(), "ingest.durability.wal.stall_after must be > 0")
	c = DefaultConfig()
	c.Ingest.Durability.Mode = "batch"
	c.Ingest.Durability.WAL.StallAfter = 0
	require.NoError(t, c.Validate(), "only the configured mode's section is checked")
	c.Ingest.Durability.Batch.QueueSpans = 0
	require.ErrorContains(t, c.Validate(), "ingest.durability.batch.queue_spans must be > 0")
	c = DefaultConfig()
	c.Store.Engine = "clickhouse"
	c.Store.ClickHouse.Cluster = "c-1"
	require.ErrorContains(t, c.Validate(), `store.clickhouse.cluster must be a plain identifier`)
	c = DefaultConfig()
	c.Log.Format = "xml"
	require.ErrorContains(t, c.Validate(), "log.format")
}

func TestValidateFollow(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		set     func(*Config)
		wantErr string
	}{
		{"off: other keys unchecked", func(c *Config) { c.Follow.OTelTraces.Poll = 0 }, ""},
		{"a server", func(c *Config) { c.Follow.OTelTraces.Source = "clickhouse://h:9000/otel" }, ""},
		{"the store's own chDB directory", func(c *Config) {
			c.Store.Embedded.DataDir, c.Follow.OTelTraces.Source = dir, dir+"/."
		}, ""},
		{"another chDB directory", func(c *Config) {
			c.Store.Embedded.DataDir, c.Follow.OTelTraces.Source = filepath.Join(dir, "store"), dir
		}, "follow.otel_traces.source " + dir + " is a chDB directory other than store.embedded.data_dir"},
		{"not a source", func(c *Config) { c.Follow.OTelTraces.Source = filepath.Join(dir, "nope") }, "neither a clickhouse:// DSN nor a chDB data directory"},
		{"two databases", func(c *Config) {
			c.Follow.OTelTraces.Source, c.Follow.OTelTraces.Table = "clickhouse://h:9000/a", "b.otel_traces"
		}, "the table names database b, the DSN a"},
		{"bad table", func(c *Config) {
			c.Follow.OTelTraces.Source, c.Follow.OTelTraces.Table = "clickhouse://h:9000/a", "x;DROP"
		}, `follow.otel_traces.table: table "x;DROP" is not a plain identifier`},
		{"settle", func(c *Config) {
			c.Follow.OTelTraces.Source, c.Follow.OTelTraces.Settle = "clickhouse://h:9000/a", 0
		}, "follow.otel_traces.settle must be > 0"},
		{"max spans per poll", func(c *Config) {
			c.Follow.OTelTraces.Source, c.Follow.OTelTraces.MaxSpansPerPoll = "clickhouse://h:9000/a", 0
		}, "follow.otel_traces.max_spans_per_poll must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
