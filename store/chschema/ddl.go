package chschema

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

//go:embed sql/*.sql
var ddlFiles embed.FS

// Features are the version-gated parts of the DDL. The portable core (the
// zero Features) runs on ClickHouse 18.16.
type Features struct {
	LowCardinality bool // LowCardinality(String) columns
	Codecs         bool // column compression codecs
	TTL            bool // table TTL for retention
	SkipIndexes    bool // data-skipping indexes (bloom filter on trace_id)
	DedupToken     bool // insert_deduplication_token on plain MergeTree
	OtelView       bool // the otel_traces-compatible view (Map, DateTime64)
	CompactParts   bool // min_bytes_for_wide_part: inserts as compact parts
	// MergeSelector: the merge selector's merge_selector_base and its
	// width heuristic are table settings. Not derived from the version
	// (FeaturesFor leaves it false): the store asks the server
	// (MergeSelectorSettings).
	MergeSelector bool
	// CompressBlocks: min_compress_block_size and max_compress_block_size
	// are table settings. Like MergeSelector, the store asks the server
	// (CompressBlockSettings).
	CompressBlocks bool
}

// CompressBlockSettings are the MergeTree settings migration 0024 sets; a
// server that lists both in system.merge_tree_settings has the
// CompressBlocks feature.
var CompressBlockSettings = []string{"min_compress_block_size", "max_compress_block_size"}

// MergeSelectorSettings are the MergeTree settings migration 0018 sets;
// a server that lists both in system.merge_tree_settings has the
// MergeSelector feature.
var MergeSelectorSettings = []string{"merge_selector_base", "merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once"}

// FeaturesFor returns what a server of the given version ("18.16.1",
// "26.7.2.1") supports. Thresholds are the releases where each feature became
// usable without experimental settings.
func FeaturesFor(version string) (Features, error) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return Features{}, fmt.Errorf("parse clickhouse version %q: want major.minor", version)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return Features{}, fmt.Errorf("parse clickhouse version %q: not numeric", version)
	}
	atLeast := func(ma, mi int) bool { return major > ma || (major == ma && minor >= mi) }
	return Features{
		LowCardinality: atLeast(19, 11),
		Codecs:         atLeast(19, 11),
		TTL:            atLeast(19, 11),
		SkipIndexes:    atLeast(20, 1),
		DedupToken:     atLeast(22, 2),
		OtelView:       atLeast(23, 3),
		CompactParts:   atLeast(20, 3),
	}, nil
}

// DDLParams fill the migration templates.
type DDLParams struct {
	Database string   // target database, validated identifier
	Features Features // what the server supports
	TTLDays  int      // retention; 0 keeps data forever (or the server lacks TTL)
	// Cluster is the name of a cluster in the servers' remote_servers, or
	// empty for a single server. With it, every table is created ON
	// CLUSTER as a replicated local table and a Distributed table over
	// it (cluster.go); without it the DDL is the templates' text as is.
	Cluster string
}

// Migration is one numbered schema change.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// Migrations renders every embedded migration for p, in version order.
// A migration whose rendered text is empty for these features (for example
// the otel_traces view on an old server) has no statements but still counts,
// so versions stay comparable across servers.
func Migrations(p DDLParams) ([]Migration, error) {
	if !ValidIdentifier(p.Database) {
		return nil, fmt.Errorf("render ddl: invalid database name %q", p.Database)
	}
	if p.Cluster != "" && !ValidIdentifier(p.Cluster) {
		return nil, fmt.Errorf("render ddl: invalid cluster name %q", p.Cluster)
	}
	names, err := fs.Glob(ddlFiles, "sql/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list ddl: %w", err)
	}
	sort.Strings(names)
	f := p.Features
	funcs := template.FuncMap{
		"lc": func(t string) string {
			if f.LowCardinality {
				return "LowCardinality(" + t + ")"
			}
			return t
		},
		"codec": func(c string) string {
			if f.Codecs {
				return " CODEC(" + c + ")"
			}
			return ""
		},
		"pathStats": func(db, local string) string { return PathStatsSelect(db + ".hops" + local) },
		"edgeStats": func(db, local string) string { return EdgeStatsSelect(db + ".hops" + local) },
	}
	data := struct {
		DB             string
		TTLDays        int
		TTL            bool // the server has table TTL, whatever the retention
		SkipIndexes    bool
		DedupToken     bool
		OtelView       bool
		Codecs         bool
		CompactParts   bool
		MergeSelector  bool
		CompressBlocks bool
		// Local is the suffix of the tables that hold rows: a
		// materialized view on a cluster reads and writes a host's
		// local tables.
		Local string
	}{p.Database, 0, f.TTL, f.SkipIndexes, f.DedupToken, f.OtelView, f.Codecs, f.CompactParts, f.MergeSelector, f.CompressBlocks, ""}
	if p.Cluster != "" {
		data.Local = LocalSuffix
	}
	if f.TTL {
		data.TTLDays = p.TTLDays
	}

	out := make([]Migration, 0, len(names))
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "sql/"), ".sql")
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("render ddl %s: name must start with a number and '_'", name)
		}
		text, err := ddlFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read ddl %s: %w", name, err)
		}
		tmpl, err := template.New(base).Funcs(funcs).Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("parse ddl %s: %w", name, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("render ddl %s: %w", name, err)
		}
		stmts := splitStatements(buf.String())
		if p.Cluster != "" {
			if stmts, err = onCluster(p, stmts); err != nil {
				return nil, fmt.Errorf("render ddl %s: %w", name, err)
			}
		}
		out = append(out, Migration{Version: version, Name: base, Statements: stmts})
	}
	return out, nil
}

// splitStatements splits rendered DDL on ";" at the end of a line, dropping
// comment-only and empty pieces (ClickHouse runs one statement per query).
func splitStatements(text string) []string {
	var out []string
	for _, piece := range strings.Split(text, ";\n") {
		piece = strings.TrimSuffix(strings.TrimSpace(piece), ";")
		var code []string
		for _, line := range strings.Split(piece, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
				code = append(code, line)
			}
		}
		if len(code) > 0 {
			out = append(out, strings.Join(code, "\n"))
		}
	}
	return out
}

// ValidIdentifier reports whether s can be used unquoted as a ClickHouse
// database or table name: [A-Za-z_][A-Za-z0-9_]*, at most 64 bytes.
func ValidIdentifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
