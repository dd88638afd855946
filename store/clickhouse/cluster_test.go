package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/clickhouse/clustertest"
	"github.com/budgetd/budgetd/store/storetest"
)

// TestCluster runs budgetd's store on a real ClickHouse cluster: 2 shards ×
// 2 replicas of 18.16 and a ZooKeeper, started once for all its cases.
func TestCluster(t *testing.T) {
	cl := clustertest.Start(t, 2, 2)
	c := clusterCase{cl: cl}

	t.Run("conformance", func(t *testing.T) {
		// No Server: the suite's outage case stops the one server and
		// starts it again; a cluster's outages are a replica's, below.
		storetest.Run(t, storetest.Harness{
			Open:      c.open(cl.Shards[0][0]),
			SlowQuery: "SELECT sleepEachRow(1) FROM numbers(10) SETTINGS max_block_size = 1",
		})
	})
	t.Run("a trace's rows are on one shard, once", c.testPlacement)
	t.Run("a retried batch is stored once through another replica", c.testRetryElsewhere)
	t.Run("two stores migrating at once record each version once", c.testConcurrentMigrations)
	t.Run("two stores upgrading an older schema at once", c.testUpgrade)
	t.Run("a new database's first table made in its first form meanwhile", c.testFoldedOvertaken)
	t.Run("a replica down stops neither writes nor reads", c.testReplicaDown)
	t.Run("a migration with a host down fails clearly and completes later", c.testMigrationHostDown)
}

type clusterCase struct {
	cl *clustertest.Cluster
}

// open returns a store opener whose DSN lists first, then every other
// server: the store connects to first while it answers.
func (c clusterCase) open(first *clickhousetest.Server) func(ctx context.Context, database string) (*chsql.Store, error) {
	return func(ctx context.Context, database string) (*chsql.Store, error) {
		cfg := clickhouse.DefaultConfig()
		cfg.DSN = "clickhouse://" + first.Addr() + "," + c.cl.DSN(database)[len("clickhouse://"):]
		cfg.Cluster = clustertest.Name
		return clickhouse.Open(ctx, cfg)
	}
}

// store opens a store on a new database through first.
func (c clusterCase) store(t *testing.T, first *clickhousetest.Server) (*chsql.Store, string) {
	t.Helper()
	db := fmt.Sprintf("cluster_%d", time.Now().UnixNano())
	s, err := c.open(first)(ctxT(t), db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, db
}

// ctxT bounds one cluster case. 18.16's DDL queue runs each ON CLUSTER
// statement on every host in turn: alone the whole TestCluster takes
// about 200 s, but under make test's parallel load it took 546 s once and
// two stores migrating at once ran past 2 minutes; every later case then
// waited behind the statements still queued. A stuck queue still fails.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// node is a connection to one server alone, to read its local tables.
func node(t *testing.T, srv *clickhousetest.Server) chsql.Conn {
	t.Helper()
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN("default")
	conn, _, err := clickhouse.Connect(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// syncReplicas waits until every replica of table's local table has
// fetched every part its shard's log lists.
func (c clusterCase) syncReplicas(t *testing.T, db, table string) {
	t.Helper()
	for _, srv := range c.cl.Servers() {
		require.NoError(t, node(t, srv).Exec(ctxT(t), "SYSTEM SYNC REPLICA "+db+"."+table+"_local", nil), srv.Addr())
	}
}

// spansPerTrace reads a server's local spans table: span rows per trace.
func spansPerTrace(t *testing.T, conn chsql.Conn, db string) map[string]uint64 {
	t.Helper()
	rows, err := conn.Query(ctxT(t), "SELECT trace_id, count() FROM "+db+".spans_local GROUP BY trace_id", nil)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var id string
		var n uint64
		require.NoError(t, rows.Scan(&id, &n))
		out[id] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// testPlacement writes 60 traces of 10 spans through the Distributed
// table: each trace's spans are all on one shard, both replicas of a shard
// hold the same rows, no row is on two shards, and the Distributed table
// counts each once.
func (c clusterCase) testPlacement(t *testing.T) {
	s, db := c.store(t, c.cl.Shards[0][0])
	ctx := ctxT(t)
	spans := traces(7, 60)
	require.NoError(t, s.WriteSpans(ctx, "placement-1", spans))
	c.syncReplicas(t, db, "spans")

	onShard := make([]map[string]uint64, len(c.cl.Shards))
	for sh, replicas := range c.cl.Shards {
		onShard[sh] = spansPerTrace(t, node(t, replicas[0]), db)
		require.NotEmpty(t, onShard[sh], "shard %d holds some of 60 traces", sh+1)
		for _, r := range replicas[1:] {
			require.Equal(t, onShard[sh], spansPerTrace(t, node(t, r), db), "the replicas of shard %d hold the same rows", sh+1)
		}
	}
	all := map[string]uint64{}
	for sh, traces := range onShard {
		for id, n := range traces {
			_, dup := all[id]
			require.False(t, dup, "trace %s on shard %d and another", id, sh+1)
			all[id] = n
		}
	}
	require.Len(t, all, 60)
	for id, n := range all {
		require.EqualValues(t, 10, n, "trace %s: every span on its shard, once", id)
	}
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 600, n, "the Distributed table counts each row once")
	got, _, err := s.Trace(ctx, spans[0].TraceID, store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, 10)
}

// testRetryElsewhere writes a batch through one host and retries it, same
// token, through a replica of the other shard and through the second
// replica of the first, as a writer that lost its connection would from
// another budgetd: the tokens one host wrote are visible through the
// Distributed batches table from the others, and what a lagging replica
// has not seen yet is dropped by the shard as a block it already has.
func (c clusterCase) testRetryElsewhere(t *testing.T) {
	first, db := c.store(t, c.cl.Shards[0][0])
	ctx := ctxT(t)
	spans := traces(8, 40)
	hops := make([]schema.Hop, 40)
	for i := range hops {
		hops[i] = schema.Hop{TraceID: spans[i*10].TraceID, SpanID: spans[i*10].SpanID, Service: "svc", Operation: "op",
			Kind: schema.KindServer, Path: "svc:op", RootPath: "svc:op", StartNs: spans[i*10].StartNs, DurationNs: 1e6}
	}
	require.NoError(t, first.WriteSpans(ctx, "retry-1", spans))
	require.NoError(t, first.WriteHops(ctx, "retry-1", hops))
	for _, srv := range []*clickhousetest.Server{c.cl.Shards[1][0], c.cl.Shards[0][1]} {
		again, err := c.open(srv)(ctx, db)
		require.NoError(t, err)
		require.NoError(t, again.WriteSpans(ctx, "retry-1", spans), srv.Addr())
		require.NoError(t, again.WriteHops(ctx, "retry-1", hops), srv.Addr())
		require.NoError(t, again.Close())
	}
	for _, table := range []string{"spans", "trace_index", "hops"} {
		c.syncReplicas(t, db, table)
	}
	for table, want := range map[string]uint64{"spans": 400, "trace_index": 200, "hops": 40} {
		n, err := first.CountRows(ctx, table)
		require.NoError(t, err)
		require.Equal(t, want, n, "%s: a batch retried through other hosts is stored once", table)
	}
}

// testConcurrentMigrations opens two stores on a new database at once,
// through hosts of different shards: both open, and after replication
// every host's schema_migrations holds each version once.
func (c clusterCase) testConcurrentMigrations(t *testing.T) {
	db := fmt.Sprintf("cluster_migrate_%d", time.Now().UnixNano())
	ctx := ctxT(t)
	stores := c.openAtOnce(t, db, c.cl.Shards[0][0], c.cl.Shards[1][1])
	// A third store opening the current schema runs no DDL and records
	// nothing.
	third, err := c.open(c.cl.Shards[1][0])(ctx, db)
	require.NoError(t, err)
	defer third.Close()
	_, known, err := stores[0].SchemaVersion(ctx)
	require.NoError(t, err)
	n, err := third.CountRows(ctx, "schema_migrations")
	require.NoError(t, err)
	require.EqualValues(t, known, n)
}

// testReplicaDown stops one replica at a time while a store writes and
// reads: first the replica its shard's queries go to first, then the host
// the store is connected to. The other replica of that shard serves; the
// stopped one catches up when it is back.
func (c clusterCase) testReplicaDown(t *testing.T) {
	s, db := c.store(t, c.cl.Shards[0][0])
	ctx := ctxT(t)
	batches := [][]schema.Span{traces(9, 20), traces(10, 20), traces(11, 20)}
	require.NoError(t, s.WriteSpans(ctx, "down-0", batches[0]))

	// Shard 2's first replica down: the Distributed tables of the host
	// the store is on send shard 2's rows and queries to its second.
	down := c.cl.Shards[1][0]
	require.NoError(t, down.Stop())
	require.NoError(t, s.WriteSpans(ctx, "down-1", batches[1]), "writes go on with a replica of shard 2 down")
	requireStored(ctx, t, s, batches[:2])
	require.NoError(t, down.Start())

	// The store's own host down: the store reconnects to the next host
	// of its DSN (the pool's dead connections fail once each).
	down = c.cl.Shards[0][0]
	require.NoError(t, down.Stop())
	var err error
	for range 20 {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = s.Ping(attempt)
		cancel()
		if err == nil {
			break
		}
	}
	require.NoError(t, err, "the store reaches another host")
	require.NoError(t, s.WriteSpans(ctx, "down-2", batches[2]), "writes go on with a replica of shard 1 down")
	requireStored(ctx, t, s, batches)
	require.NoError(t, down.Start())

	// Back, each replica fetches what its shard took while it was down.
	c.syncReplicas(t, db, "spans")
	total := 0
	for sh, replicas := range c.cl.Shards {
		want := spansPerTrace(t, node(t, replicas[0]), db)
		require.Equal(t, want, spansPerTrace(t, node(t, replicas[1]), db), "shard %d's replicas agree after the outage", sh+1)
		for _, n := range want {
			total += int(n)
		}
	}
	require.Equal(t, 600, total)
}

// traces returns n traces of 10 spans each.
func traces(seed uint64, n int) []schema.Span { return storetest.SpanBatch(seed, n*10) }

// openAtOnce opens a store on db through each of hosts at the same time;
// each is current when it has opened, and every version is recorded once.
func (c clusterCase) openAtOnce(t *testing.T, db string, hosts ...*clickhousetest.Server) []*chsql.Store {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	stores := make([]*chsql.Store, len(hosts))
	errs := make([]error, len(hosts))
	for i, srv := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = c.open(srv)(ctx, db)
		}()
	}
	wg.Wait()
	for i := range stores {
		if stores[i] != nil {
			t.Cleanup(func() { _ = stores[i].Close() })
		}
	}
	known := 0
	for i, s := range stores {
		require.NoError(t, errs[i], "store %d, through %s", i, hosts[i].Addr())
		applied, k, err := s.SchemaVersion(ctx)
		require.NoError(t, err)
		require.Equal(t, k, applied, "store %d is current once open", i)
		known = k
	}
	c.requireRecordedOnce(t, db, known)
	return stores
}

// requireRecordedOnce checks every host's schema_migrations, once it has
// fetched every record: versions 1 to known, each once.
func (c clusterCase) requireRecordedOnce(t *testing.T, db string, known int) {
	t.Helper()
	ctx := ctxT(t)
	for _, srv := range c.cl.Servers() {
		conn := node(t, srv)
		require.NoError(t, conn.Exec(ctx, "SYSTEM SYNC REPLICA "+db+".schema_migrations", nil))
		rows, err := conn.Query(ctx, "SELECT version, count() FROM "+db+".schema_migrations GROUP BY version ORDER BY version", nil)
		require.NoError(t, err)
		var versions []uint32
		for rows.Next() {
			var v uint32
			var n uint64
			require.NoError(t, rows.Scan(&v, &n))
			require.EqualValues(t, 1, n, "%s: version %d recorded once", srv.Addr(), v)
			versions = append(versions, v)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		require.Len(t, versions, known, "%s: every version recorded", srv.Addr())
	}
}

// testUpgrade migrates a database made by an older budgetd (migrations 1
// to 5, a hop stored) to the current schema, from two stores at once: the
// later migrations' ADD COLUMNs run ON CLUSTER on the local tables (the
// second store finds each column added), the Distributed tables are made
// again over the new columns, the hop is still there, and every version
// is recorded once.
func (c clusterCase) testUpgrade(t *testing.T) {
	db := fmt.Sprintf("cluster_upgrade_%d", time.Now().UnixNano())
	ctx := ctxT(t)
	conn := node(t, c.cl.Shards[0][0])
	version, err := conn.Version(ctx)
	require.NoError(t, err)
	features, err := chschema.FeaturesFor(version)
	require.NoError(t, err)
	p := chschema.DDLParams{Database: db, Features: features, Cluster: clustertest.Name}
	migrations, err := chschema.Migrations(p)
	require.NoError(t, err)
	require.NoError(t, conn.Exec(ctx, chschema.CreateDatabase(p), nil))
	require.NoError(t, conn.Exec(ctx, chschema.MigrationsTable(p), nil))
	const older = 5
	for _, m := range migrations[:older] {
		for _, st := range m.Statements {
			require.NoError(t, conn.Exec(ctx, st, nil), st)
		}
		// INSERT … SELECT: clickhouse-go's Exec sends no data block for
		// an INSERT … VALUES, and 18.16 waits for one.
		require.NoError(t, conn.Exec(ctx, "INSERT INTO "+db+".schema_migrations (version, name, applied_ns)"+
			" SELECT toUInt32({v:UInt32}), {n:String}, toUInt64(0)", chsql.Params{chsql.P("v", uint64(m.Version)), chsql.P("n", m.Name)}))
	}
	require.NoError(t, conn.Exec(ctx, "INSERT INTO "+db+".hops_local (trace_id, span_id, path, start_ns) SELECT 't1', 's1', 'a:op', toUInt64(1)", nil))

	stores := c.openAtOnce(t, db, c.cl.Shards[0][1], c.cl.Shards[1][0])
	c.requireCurrentHops(t, db, features)
	n, err := stores[1].CountRows(ctx, "hops")
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the hop stored before the upgrade")
}

// requireCurrentHops checks that every host's hops and hops_local have
// the current columns, in the order the writer sends them.
func (c clusterCase) requireCurrentHops(t *testing.T, db string, features chschema.Features) {
	t.Helper()
	ctx := ctxT(t)
	var want []chsql.ColumnType
	for _, tc := range chsql.InsertTables(features) {
		if tc.Table == "hops" {
			want = tc.Columns
		}
	}
	for _, srv := range c.cl.Servers() {
		for _, table := range []string{"hops", "hops_local"} {
			rows, err := node(t, srv).Query(ctx, "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String}",
				chsql.Params{chsql.P("db", db), chsql.P("t", table)})
			require.NoError(t, err)
			var got []chsql.ColumnType
			for rows.Next() {
				var col chsql.ColumnType
				require.NoError(t, rows.Scan(&col.Name, &col.Type))
				got = append(got, col)
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
			require.Equal(t, want, got, "%s: %s.%s has the current columns, in order", srv.Addr(), db, table)
		}
	}
}

// testFoldedOvertaken makes, deterministically, what two stores opening a
// new database at once can leave: the second finds the first's tables
// and migrates one migration at a time, and its CREATE of hops_local in
// its first form reaches some hosts before the first store's folded one,
// so those hosts' hops_local lacks the later columns the folded
// statements after it read. Here the second shard's hosts have that
// table while the host the store is connected to has none: the store
// starts the folded schema, a statement of it fails on those hosts, and
// it goes on one migration at a time, which adds their columns.
func (c clusterCase) testFoldedOvertaken(t *testing.T) {
	db := fmt.Sprintf("cluster_overtaken_%d", time.Now().UnixNano())
	ctx := ctxT(t)
	version, err := node(t, c.cl.Shards[0][0]).Version(ctx)
	require.NoError(t, err)
	features, err := chschema.FeaturesFor(version)
	require.NoError(t, err)
	p := chschema.DDLParams{Database: db, Features: features, Cluster: clustertest.Name}
	migrations, err := chschema.Migrations(p)
	require.NoError(t, err)
	createHops := ""
	for _, m := range migrations {
		for _, st := range m.Statements {
			if createHops == "" && strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS "+db+".hops_local ") {
				createHops = strings.Replace(st, " ON CLUSTER "+clustertest.Name, "", 1)
			}
		}
	}
	require.NotEmpty(t, createHops)
	require.NotContains(t, createHops, "path_calls", "hops_local in its first form")
	for _, srv := range c.cl.Shards[1] {
		conn := node(t, srv)
		require.NoError(t, conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db, nil))
		require.NoError(t, conn.Exec(ctx, createHops, nil), srv.Addr())
	}

	stores := c.openAtOnce(t, db, c.cl.Shards[0][0])
	c.requireCurrentHops(t, db, features)
	require.NoError(t, stores[0].WriteSpans(ctx, "after", traces(13, 4)))
}

// testMigrationHostDown opens a store on a new database while a host is
// down: ON CLUSTER statements wait for every host, so the open fails at its
// deadline with an error that says why; once the host is back (it runs
// what queued meanwhile), the next open finishes the migration.
func (c clusterCase) testMigrationHostDown(t *testing.T) {
	db := fmt.Sprintf("cluster_down_%d", time.Now().UnixNano())
	ctx := ctxT(t)
	down := c.cl.Shards[1][1]
	require.NoError(t, down.Stop())
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := c.open(c.cl.Shards[0][0])(short, db)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "not every host ran the statement before the deadline (is every host of remote_servers up?)")

	require.NoError(t, down.Start())
	s, err := c.open(c.cl.Shards[0][0])(ctx, db)
	require.NoError(t, err)
	defer s.Close()
	applied, known, err := s.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, known, applied)
	require.NoError(t, s.WriteSpans(ctx, "after", traces(12, 4)))
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 40, n)
}

// requireStored reads every span of batches back through the store.
func requireStored(ctx context.Context, t *testing.T, s *chsql.Store, batches [][]schema.Span) {
	t.Helper()
	want := 0
	for _, b := range batches {
		want += len(b)
		missing, err := s.MissingSpans(ctx, b)
		require.NoError(t, err)
		require.Empty(t, missing)
	}
	n, err := s.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, want, n)
	got, _, err := s.Trace(ctx, batches[len(batches)-1][0].TraceID, store.TraceLimits{})
	require.NoError(t, err)
	require.Len(t, got, 10)
}
