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
