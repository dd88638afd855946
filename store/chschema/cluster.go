package chschema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// LocalSuffix names a table's replicated local table on a cluster: table
// T's rows live in T_local on each shard, and T is the Distributed table
// over them, so every read and write that names T works on one server and
// on a cluster alike.
const LocalSuffix = "_local"

// shardingKeys are the Distributed tables' sharding keys. The tables read
// together by trace are sharded alike, by trace id: a trace's spans, index
// rows, hops, findings and re-analysis records are on one shard, so the
// reads that filter one by another (hops of re-analysed traces, spans of
// indexed traces) run on each shard against its local tables
// (distributed_product_mode = local) and still see everything. Edge
// findings have no trace id and all land on one shard, which only they
// read. problem_stats is sharded by problem, so a problem's rows merge
// (SummingMergeTree) on one shard; batches by token, which is what a write
// looks up; edge_states by budgetd replica and follow_positions by source,
// so the rows that ReplacingMergeTree collapses (same sorting key) meet on
// one shard — reads take the newest row per key with GROUP BY, which
// Distributed merges across shards anyway. path_stats and edge_stats rows are
// inserted through the Distributed tables (the store adds them up from
// each batch of hops; until migration 0025 materialized views filled them
// on each shard from its local hops), and reads sum across shards.
var shardingKeys = map[string]string{
	"spans":            "cityHash64(trace_id)",
	"trace_index":      "cityHash64(trace_id)",
	"hops":             "cityHash64(trace_id)",
	"findings":         "cityHash64(trace_id)",
	"reanalysed":       "cityHash64(trace_id)",
	"problem_stats":    "cityHash64(problem_id)",
	"batches":          "cityHash64(token)",
	"edge_states":      "cityHash64(replica)",
	"follow_positions": "cityHash64(source)",
	"path_stats":       "cityHash64(path)",
	"edge_stats":       "cityHash64(caller_service, callee_service)",
	"stats_since":      "cityHash64(since_ns)",
}

// repeatableRows are tables where two different batches can hold exactly
// the same rows: two analyses that each add one finding to the same
// problem and interval write the same problem_stats row. A replicated
// table drops a block identical to one of its last
// replicated_deduplication_window blocks as a retry, which would lose the
// second count, so on servers without insert_deduplication_token (where
// that hash is the only identity a block has) these tables turn it off and
// rely on the batches table's tokens alone.
var repeatableRows = map[string]bool{"problem_stats": true, "path_stats": true, "edge_stats": true}

// zkTablePath is where a shard's replicas of table coordinate in
// ZooKeeper: one path per shard ({shard} macro), database and table.
func zkTablePath(db, table string) string {
	return "/clickhouse/tables/{shard}/" + db + "/" + table
}

// CreateDatabase is the statement that creates database p.Database: on
// every host of p.Cluster when it is set.
func CreateDatabase(p DDLParams) string {
	return "CREATE DATABASE IF NOT EXISTS " + p.Database + onClusterClause(p)
}

// MigrationsTable is the statement that creates schema_migrations, the
// record of applied migrations. On a cluster it is one replicated table
// with a replica on every host (one ZooKeeper path for all shards, replica
// names unique across them), not sharded: every host holds every record,
// so a store reads the schema version from the host it is connected to,
// and ZooKeeper's block deduplication keeps one of two identical records
// written at once by two stores migrating together.
func MigrationsTable(p DDLParams) string {
	const cols = " (version UInt32, name String, applied_ns UInt64) ENGINE = "
	if p.Cluster == "" {
		return "CREATE TABLE IF NOT EXISTS " + p.Database + ".schema_migrations" + cols + "MergeTree ORDER BY version"
	}
	return "CREATE TABLE IF NOT EXISTS " + p.Database + ".schema_migrations" + onClusterClause(p) + cols +
		"ReplicatedMergeTree('/clickhouse/tables/all_shards/" + p.Database + "/schema_migrations', '{shard}_{replica}') ORDER BY version"
}

func onClusterClause(p DDLParams) string {
	if p.Cluster == "" {
		return ""
	}
	return " ON CLUSTER " + p.Cluster
}

// onCluster rewrites one migration's single-server statements for
// p.Cluster. Every statement must be of a shape it knows — a CREATE TABLE
// of a MergeTree-family table, an ALTER TABLE of one, a CREATE VIEW — so a
// new migration it cannot carry over fails the DDL tests instead of
// running on one host of a cluster:
//
//   - CREATE TABLE T (…) ENGINE = XMergeTree(args) … becomes T_local, ON
//     CLUSTER, ENGINE = ReplicatedXMergeTree('<zk path>', '{replica}',
//     args) …, then T ON CLUSTER AS T_local ENGINE = Distributed(cluster,
//     db, T_local, sharding key);
//   - ALTER TABLE T ADD COLUMN … runs ON CLUSTER on T_local, and T is
//     made again over T_local's columns at the end of the migration; a
//     change of storage alone (MODIFY SETTING, a column's CODEC, a
//     data-skipping index) runs on T_local only;
//   - CREATE VIEW V AS … runs ON CLUSTER: it reads the Distributed tables;
//   - CREATE MATERIALIZED VIEW V TO … runs ON CLUSTER: the template names
//     the local tables it reads and writes ({{.Local}});
//   - DROP TABLE IF EXISTS V of a view runs ON CLUSTER;
//   - INSERT INTO T SELECT … runs once, on the Distributed tables.
func onCluster(p DDLParams, stmts []string) ([]string, error) {
	var out, altered []string
	for _, st := range stmts {
		rewritten, table, err := clusterStatement(p, st)
		if err != nil {
			return nil, err
		}
		out = append(out, rewritten...)
		if table != "" && !slices.Contains(altered, table) {
			altered = append(altered, table)
		}
	}
	// 18.16 refuses an ALTER ON CLUSTER of a table that is not replicated
	// on a cluster with internal_replication ("Table hops isn't
	// replicated, but shard #2 is replicated"), and a Distributed table
	// is not. It holds no rows (inserts are synchronous), so it is made
	// again over its local table's new columns instead: between the two
	// statements reads of it fail, during a migration only.
	for _, table := range altered {
		out = append(out, "DROP TABLE IF EXISTS "+p.Database+"."+table+onClusterClause(p), distributedTable(p, table))
	}
	return out, nil
}

// distributedTable creates table as the Distributed table over its local
// table, with the local table's columns.
func distributedTable(p DDLParams, table string) string {
	db, local := p.Database+".", table+LocalSuffix
	return "CREATE TABLE IF NOT EXISTS " + db + table + onClusterClause(p) + " AS " + db + local +
		"\nENGINE = Distributed(" + p.Cluster + ", " + p.Database + ", " + local + ", " + shardingKeys[table] + ")"
}

// clusterStatement rewrites one statement; altered is the table whose
// columns it changes, whose Distributed table must then be made again.
func clusterStatement(p DDLParams, st string) (out []string, altered string, err error) {
	db, on := p.Database+".", onClusterClause(p)
	if rest, ok := strings.CutPrefix(st, "CREATE TABLE IF NOT EXISTS "+db); ok {
		table, body, ok := strings.Cut(rest, " (")
		if !ok || !ValidIdentifier(table) {
			return nil, "", fmt.Errorf("put %q on a cluster: want CREATE TABLE IF NOT EXISTS db.table (…)", firstLine(st))
		}
		if _, ok := shardingKeys[table]; !ok {
			return nil, "", fmt.Errorf("put table %s on a cluster: no sharding key (chschema.shardingKeys)", table)
		}
		local := table + LocalSuffix
		body, err := replicatedEngine(body, zkTablePath(p.Database, table), repeatableRows[table] && !p.Features.DedupToken)
		if err != nil {
			return nil, "", fmt.Errorf("put table %s on a cluster: %w", table, err)
		}
		return []string{"CREATE TABLE IF NOT EXISTS " + db + local + on + " (" + body, distributedTable(p, table)}, "", nil
	}
	if rest, ok := strings.CutPrefix(st, "ALTER TABLE "+db); ok {
		table, change, ok := strings.Cut(rest, " ")
		if !ok || shardingKeys[table] == "" {
			return nil, "", fmt.Errorf("put %q on a cluster: not an ALTER of one of budgetd's tables", firstLine(st))
		}
		local := "ALTER TABLE " + db + table + LocalSuffix + on + " " + change
		switch {
		case strings.HasPrefix(change, "ADD COLUMN "):
			return []string{local}, table, nil
		case strings.HasPrefix(change, "MODIFY SETTING "), strings.HasPrefix(change, "ADD INDEX "),
			strings.HasPrefix(change, "MODIFY COLUMN ") && strings.Contains(change, " CODEC("):
			return []string{local}, "", nil
		}
		return nil, "", fmt.Errorf("put %q on a cluster: an ALTER it does not know whether the Distributed table needs", firstLine(st))
	}
	if rest, ok := strings.CutPrefix(st, "CREATE VIEW IF NOT EXISTS "+db); ok {
		view, query, ok := strings.Cut(rest, " AS\n")
		if !ok || !ValidIdentifier(view) {
			return nil, "", fmt.Errorf("put %q on a cluster: want CREATE VIEW IF NOT EXISTS db.view AS", firstLine(st))
		}
		return []string{"CREATE VIEW IF NOT EXISTS " + db + view + on + " AS\n" + query}, "", nil
	}
	if rest, ok := strings.CutPrefix(st, "CREATE MATERIALIZED VIEW IF NOT EXISTS "+db); ok {
		view, query, ok := strings.Cut(rest, " TO ")
		if !ok || !ValidIdentifier(view) || !strings.Contains(firstLine(query), LocalSuffix+" AS") {
			return nil, "", fmt.Errorf("put %q on a cluster: want CREATE MATERIALIZED VIEW IF NOT EXISTS db.view TO db.table_local AS", firstLine(st))
		}
		return []string{"CREATE MATERIALIZED VIEW IF NOT EXISTS " + db + view + on + " TO " + query}, "", nil
	}
	if rest, ok := strings.CutPrefix(st, "DROP TABLE IF EXISTS "+db); ok {
		// A view (every host has it under one name); a table of budgetd's
		// is a local and a Distributed table, which this does not drop.
		if !ValidIdentifier(rest) || shardingKeys[rest] != "" {
			return nil, "", fmt.Errorf("put %q on a cluster: want DROP TABLE IF EXISTS db.view", firstLine(st))
		}
		return []string{"DROP TABLE IF EXISTS " + db + rest + on}, "", nil
	}
	if rest, ok := strings.CutPrefix(st, "INSERT INTO "+db); ok {
		table, _, _ := strings.Cut(rest, " ")
		if shardingKeys[table] == "" {
			return nil, "", fmt.Errorf("put %q on a cluster: not an INSERT into one of budgetd's tables", firstLine(st))
		}
		return []string{st}, "", nil
	}
	return nil, "", fmt.Errorf("put %q on a cluster: not a statement it knows", firstLine(st))
}

// replicatedEngine rewrites the "…\n) ENGINE = XMergeTree[(args)]…" of a
// CREATE TABLE body into its replicated engine at zkPath, and turns block
// deduplication off when noHashDedup is set.
func replicatedEngine(body, zkPath string, noHashDedup bool) (string, error) {
	const marker = "\n) ENGINE = "
	i := strings.Index(body, marker)
	if i < 0 {
		return "", errors.New("no ENGINE clause")
	}
	columns, rest := body[:i+len(marker)], body[i+len(marker):]
	end := strings.IndexAny(rest, "(\n ")
	if end < 0 {
		end = len(rest)
	}
	engine, rest := rest[:end], rest[end:]
	if !strings.HasSuffix(engine, "MergeTree") {
		return "", fmt.Errorf("engine %s is not of the MergeTree family", engine)
	}
	args := ""
	if strings.HasPrefix(rest, "(") {
		closing := matchingParen(rest)
		if closing < 0 {
			return "", fmt.Errorf("engine %s: unbalanced parentheses", engine)
		}
		args, rest = rest[1:closing], rest[closing+1:]
	}
	replicated := "Replicated" + engine + "('" + zkPath + "', '{replica}'"
	if args != "" {
		replicated += ", " + args
	}
	replicated += ")"
	if noHashDedup {
		const off = "replicated_deduplication_window = 0"
		if strings.Contains(rest, "\nSETTINGS ") {
			rest += ", " + off
		} else {
			rest += "\nSETTINGS " + off
		}
	}
	return columns + replicated + rest, nil
}

// matchingParen returns the index of the parenthesis that closes s[0], or
// -1.
func matchingParen(s string) int {
	depth := 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Folded returns the statements that create the schema of migrations,
// rendered for p.Cluster, in a database that holds none of its tables yet:
// each ADD COLUMN folded into its table's CREATE, without the
// Distributed tables' re-creation that follows an ADD COLUMN, since they
// are created over complete local tables. A view a later migration drops
// is created and then dropped, as one migration at a time does. It spares
// a new database one replicated ALTER per added column, each of which
// 18.16 runs in about a second. The result's tables have the columns, in the order, that the
// migrations one by one give them (the conformance suite checks them
// against the Go tables).
func Folded(p DDLParams, migrations []Migration) []string {
	createPrefix := "CREATE TABLE IF NOT EXISTS " + p.Database + "."
	alterPrefix := "ALTER TABLE " + p.Database + "."
	var out []string
	created := map[string]int{} // table name → its CREATE's index in out
	seen := map[string]bool{}
	for _, m := range migrations {
		for _, st := range m.Statements {
			if rest, ok := strings.CutPrefix(st, createPrefix); ok {
				if seen[st] {
					continue // a Distributed table made again
				}
				table, _, _ := strings.Cut(rest, " ")
				created[table] = len(out)
			}
			if rest, ok := strings.CutPrefix(st, "DROP TABLE IF EXISTS "+p.Database+"."); ok {
				name, _, _ := strings.Cut(rest, " ")
				if shardingKeys[name] != "" {
					continue // only to make a Distributed table again
				}
				// A view a later migration drops stays created first: its
				// CREATE reads its table's later columns, which is what
				// tells a table made in its first form meanwhile
				// (createFolded's fallback in chsql).
			}
			if rest, ok := strings.CutPrefix(st, alterPrefix); ok {
				table, change, _ := strings.Cut(rest, " ")
				change = strings.TrimPrefix(change, "ON CLUSTER "+p.Cluster+" ")
				column, isAdd := strings.CutPrefix(change, "ADD COLUMN ")
				if i, ok := created[table]; ok && isAdd {
					before, after, _ := strings.Cut(out[i], "\n) ENGINE = ")
					out[i] = before + ",\n    " + column + "\n) ENGINE = " + after
					continue
				}
			}
			seen[st] = true
			out = append(out, st)
		}
	}
	return out
}
