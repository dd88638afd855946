package chschema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFeaturesFor(t *testing.T) {
	tests := []struct {
		version string
		want    Features
		wantErr string
	}{
		{version: "18.16.1", want: Features{}},
		{version: "19.11", want: Features{LowCardinality: true, Codecs: true, TTL: true}},
		{version: "20.3.21.2", want: Features{LowCardinality: true, Codecs: true, TTL: true, SkipIndexes: true, CompactParts: true}},
		{version: "22.2", want: Features{LowCardinality: true, Codecs: true, TTL: true, SkipIndexes: true, CompactParts: true, DedupToken: true}},
		{version: "26.7.2.1", want: Features{LowCardinality: true, Codecs: true, TTL: true, SkipIndexes: true, CompactParts: true, DedupToken: true, OtelView: true}},
		{version: "26", wantErr: "want major.minor"},
		{version: "x.1", wantErr: "not numeric"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			got, err := FeaturesFor(tt.version)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestMigrations renders the embedded DDL for the oldest and a current
// server: the same numbered versions on both, in order, every statement
// naming the database, and the version-gated parts only where supported.
func TestMigrations(t *testing.T) {
	current, err := FeaturesFor("26.7")
	require.NoError(t, err)
	old, err := Migrations(DDLParams{Database: "budgetd_old", TTLDays: 7})
	require.NoError(t, err)
	cur, err := Migrations(DDLParams{Database: "budgetd", Features: current, TTLDays: 7})
	require.NoError(t, err)

	require.NotEmpty(t, cur)
	require.Len(t, old, len(cur), "versions stay comparable across servers")
	for i, m := range cur {
		require.Equal(t, i+1, m.Version, "versions are 1, 2, 3, …: %s", m.Name)
		require.Equal(t, m.Version, old[i].Version)
		require.Equal(t, m.Name, old[i].Name)
		require.True(t, strings.HasPrefix(m.Name, fmt.Sprintf("%04d_", m.Version)), m.Name)
		for _, st := range m.Statements {
			require.Contains(t, st, "budgetd.", "%s: %s", m.Name, st)
			require.NotContains(t, st, "{{", m.Name)
			require.False(t, strings.HasSuffix(strings.TrimSpace(st), ";"), "%s: one statement per query, no ';'", m.Name)
		}
	}

	all := func(ms []Migration) string {
		var b strings.Builder
		for _, m := range ms {
			for _, st := range m.Statements {
				b.WriteString(st + "\n")
			}
		}
		return b.String()
	}
	curText, oldText := all(cur), all(old)
	require.Contains(t, curText, "otel_traces")
	require.NotContains(t, oldText, "otel_traces", "18.16 has no Map or DateTime64")
	require.Contains(t, curText, "LowCardinality(")
	require.NotContains(t, oldText, "LowCardinality(")
	require.Contains(t, curText, "CODEC(")
	require.NotContains(t, oldText, "CODEC(")
	require.Contains(t, curText, "TTL ")
	require.NotContains(t, oldText, "TTL ", "the server lacks TTL: TTLDays is ignored")
	require.NotContains(t, curText, "merge_selector_base", "the store asks the server; the version does not say")
	require.NotContains(t, curText, "min_compress_block_size", "the store asks the server; the version does not say")

	current.MergeSelector = true
	wide, err := Migrations(DDLParams{Database: "budgetd", Features: current})
	require.NoError(t, err)
	for _, table := range []string{"spans", "trace_index", "hops", "findings"} {
		require.Contains(t, all(wide), "ALTER TABLE budgetd."+table+" MODIFY SETTING merge_selector_base = 10, "+
			"merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once = 0\n")
	}
	require.NotContains(t, all(wide), "min_compress_block_size")

	current.CompressBlocks = true
	blocks, err := Migrations(DDLParams{Database: "budgetd", Features: current})
	require.NoError(t, err)
	for _, table := range []string{"spans", "hops"} {
		require.Contains(t, all(blocks), "ALTER TABLE budgetd."+table+" MODIFY SETTING min_compress_block_size = 8192, max_compress_block_size = 65536\n")
	}
}

func TestMigrationsRefuseBadDatabase(t *testing.T) {
	for _, db := range []string{"", "budgetd; DROP TABLE spans", "1db", "bud-getd", strings.Repeat("a", 65)} {
		_, err := Migrations(DDLParams{Database: db})
		require.ErrorContains(t, err, "invalid database name", "%q", db)
	}
}

func TestDDLValidIdentifier(t *testing.T) {
	for _, s := range []string{"budgetd", "_x", "Budgetd_2", strings.Repeat("a", 64)} {
		require.True(t, ValidIdentifier(s), s)
	}
	for _, s := range []string{"", "2x", "a-b", "a.b", "a b", "`a`", "é", strings.Repeat("a", 65)} {
		require.False(t, ValidIdentifier(s), s)
	}
}

// TestClusterMigrations renders the DDL for a cluster on the oldest and a
// current server: every statement runs ON CLUSTER, every table is a
// replicated local table under a Distributed one of the same name, and
// the versions are those of a single server.
func TestClusterMigrations(t *testing.T) {
	current, err := FeaturesFor("26.7")
	require.NoError(t, err)
	// The table settings a current server lists (the store asks it).
	current.MergeSelector, current.CompressBlocks = true, true
	for _, f := range []Features{{}, current} {
		single, err := Migrations(DDLParams{Database: "budgetd", Features: f})
		require.NoError(t, err)
		cluster, err := Migrations(DDLParams{Database: "budgetd", Features: f, Cluster: "c1"})
		require.NoError(t, err)
		require.Len(t, cluster, len(single))
		var text strings.Builder
		for i, m := range cluster {
			require.Equal(t, single[i].Version, m.Version)
			require.GreaterOrEqual(t, len(m.Statements), len(single[i].Statements), m.Name)
			for _, st := range m.Statements {
				if strings.HasPrefix(st, "INSERT INTO ") {
					// Rows go through the Distributed tables, once.
					require.NotContains(t, st, LocalSuffix, m.Name)
					continue
				}
				require.Contains(t, st, " ON CLUSTER c1", "%s: %s", m.Name, st)
				if strings.HasPrefix(st, "CREATE MATERIALIZED VIEW ") {
					require.Contains(t, st, " TO budgetd.", m.Name)
					require.Equal(t, 2, strings.Count(st, LocalSuffix), "%s: a view reads and writes a host's local tables: %s", m.Name, st)
				}
				if strings.HasPrefix(st, "DROP ") {
					require.NotContains(t, st, LocalSuffix, "%s: only Distributed tables, which hold no rows, are dropped (to be made again)", m.Name)
				}
				require.NotContains(t, st, "ENGINE = MergeTree", m.Name)
				text.WriteString(st + "\n")
			}
		}
		all := text.String()
		for table := range shardingKeys {
			require.Contains(t, all, "CREATE TABLE IF NOT EXISTS budgetd."+table+"_local ON CLUSTER c1 (")
			require.Contains(t, all, "Replicated")
			require.Contains(t, all, "'/clickhouse/tables/{shard}/budgetd/"+table+"', '{replica}'")
			require.Contains(t, all, "CREATE TABLE IF NOT EXISTS budgetd."+table+" ON CLUSTER c1 AS budgetd."+table+"_local\n"+
				"ENGINE = Distributed(c1, budgetd, "+table+"_local, "+shardingKeys[table]+")")
		}
		require.Contains(t, all, "ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/budgetd/problem_stats', '{replica}', (findings, requests, impact))")
		require.Contains(t, all, "ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/budgetd/path_stats', '{replica}', (n, total))")
		require.Contains(t, all, "ALTER TABLE budgetd.hops_local ON CLUSTER c1 ADD COLUMN analyzed_ns UInt64 DEFAULT 0\n")
		require.NotContains(t, all, "ALTER TABLE budgetd.hops ON CLUSTER", "18.16 refuses ALTER ON CLUSTER of a Distributed table")
		require.Contains(t, all, "ADD COLUMN analyzed_ns UInt64 DEFAULT 0\nDROP TABLE IF EXISTS budgetd.hops ON CLUSTER c1\n"+
			"CREATE TABLE IF NOT EXISTS budgetd.hops ON CLUSTER c1 AS budgetd.hops_local\n")
		if f.DedupToken {
			require.NotContains(t, all, "replicated_deduplication_window = 0", "tokens tell retries from repeats")
		} else {
			require.Contains(t, all, "SETTINGS replicated_deduplication_window = 0", "problem_stats rows repeat legitimately")
		}
		if f.CompactParts {
			require.Contains(t, all, "ALTER TABLE budgetd.spans_local ON CLUSTER c1 MODIFY SETTING")
			require.NotContains(t, all, "ALTER TABLE budgetd.spans ON CLUSTER c1 MODIFY SETTING", "a Distributed table stores nothing")
		}
		if f.OtelView {
			require.Contains(t, all, "CREATE VIEW IF NOT EXISTS budgetd.otel_traces ON CLUSTER c1 AS\nSELECT")
		}
		require.Contains(t, all, "DROP TABLE IF EXISTS budgetd.path_stats_mv ON CLUSTER c1\n", "the statistics views go on every host")
		if f.SkipIndexes {
			require.Contains(t, all, "ALTER TABLE budgetd.hops_local ON CLUSTER c1 ADD INDEX idx_trace_id trace_id TYPE bloom_filter")
		}
	}
}

func TestClusterStatementsRefused(t *testing.T) {
	p := DDLParams{Database: "budgetd", Cluster: "c1"}
	for _, st := range []string{
		"CREATE TABLE IF NOT EXISTS budgetd.unknown (x UInt8\n) ENGINE = MergeTree ORDER BY x",
		"CREATE TABLE IF NOT EXISTS budgetd.spans (x UInt8\n) ENGINE = Log",
		"ALTER TABLE budgetd.spans DROP COLUMN x",
		"DROP TABLE budgetd.spans",
		"DROP TABLE IF EXISTS budgetd.spans",
	} {
		_, err := onCluster(p, []string{st})
		require.Error(t, err, st)
	}
	_, err := Migrations(DDLParams{Database: "budgetd", Cluster: "c-1"})
	require.ErrorContains(t, err, "invalid cluster name")
}

func TestMigrationsTableAndDatabase(t *testing.T) {
	single := DDLParams{Database: "budgetd"}
	require.Equal(t, "CREATE DATABASE IF NOT EXISTS budgetd", CreateDatabase(single))
	require.Equal(t, "CREATE TABLE IF NOT EXISTS budgetd.schema_migrations (version UInt32, name String, applied_ns UInt64) ENGINE = MergeTree ORDER BY version",
		MigrationsTable(single))
	cluster := DDLParams{Database: "budgetd", Cluster: "c1"}
	require.Equal(t, "CREATE DATABASE IF NOT EXISTS budgetd ON CLUSTER c1", CreateDatabase(cluster))
	require.Contains(t, MigrationsTable(cluster), "schema_migrations ON CLUSTER c1 (")
	require.Contains(t, MigrationsTable(cluster), "ReplicatedMergeTree('/clickhouse/tables/all_shards/budgetd/schema_migrations', '{shard}_{replica}')")
}

// TestFolded checks that a new database on a cluster gets each added
// column in its table's CREATE, in migration order, and no ALTER or DROP
// of a column the CREATE already has.
func TestFolded(t *testing.T) {
	current, err := FeaturesFor("26.7")
	require.NoError(t, err)
	for _, f := range []Features{{}, current} {
		p := DDLParams{Database: "budgetd", Features: f, Cluster: "c1"}
		ms, err := Migrations(p)
		require.NoError(t, err)
		folded := Folded(p, ms)
		all := strings.Join(folded, "\n")
		require.NotContains(t, all, "ADD COLUMN")
		require.NotContains(t, all, "DROP TABLE IF EXISTS budgetd.hops ", "no Distributed table made again")
		var hops string
		for _, st := range folded {
			if strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS budgetd.hops_local ON CLUSTER c1 (") {
				hops = st
			}
		}
		require.Contains(t, hops, "inferred UInt8,\n    analyzed_ns UInt64 DEFAULT 0,\n    callee_duration_ns UInt64 DEFAULT 0,\n"+
			"    inferred_timeout_ms Nullable(Float64),\n    inferred_remaining_ms Nullable(Float64),\n    inference_confidence Float64 DEFAULT 0,\n"+
			"    path_calls UInt32 DEFAULT 0\n) ENGINE = ReplicatedMergeTree(")
		require.Equal(t, 1, strings.Count(all, "CREATE TABLE IF NOT EXISTS budgetd.hops ON CLUSTER c1 AS"), "the Distributed table once")
		require.Contains(t, all, "DROP TABLE IF EXISTS budgetd.path_stats_mv ON CLUSTER c1", "a view a later migration drops is dropped")
		require.Less(t, strings.Index(all, "CREATE MATERIALIZED VIEW IF NOT EXISTS budgetd.path_stats_mv"),
			strings.Index(all, "DROP TABLE IF EXISTS budgetd.path_stats_mv"), "after it is created")
		require.Contains(t, all, "CREATE TABLE IF NOT EXISTS budgetd.path_stats_local ON CLUSTER c1 (")
		if f.CompactParts {
			require.Contains(t, all, "ALTER TABLE budgetd.hops_local ON CLUSTER c1 MODIFY SETTING", "storage changes stay ALTERs")
		}
	}
}
