package chsql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
)

// Config is what the shared store needs from the user's configuration.
type Config struct {
	Database string // created if missing; a plain identifier
	TTLDays  int    // retention; 0 keeps data forever
	// Cluster is the remote_servers cluster the schema is created on (ON
	// CLUSTER, replicated local tables under Distributed ones; see
	// chschema.DDLParams.Cluster), or empty for one server.
	Cluster string
}

// Store implements store.Store over an engine's Conn.
type Store struct {
	conn     Conn
	db       string
	cluster  string
	features chschema.Features
	known    int // highest migration version this binary has
	spare    spareBlocks
	since    statsSince // when the interval statistics began
	// reanalyses are the analysis times of the re-analyses this store
	// recorded (WriteReanalysed), which WriteHops looks up.
	reanalyses recentReanalyses
}

var _ store.Store = (*Store)(nil)

// Open creates the database if needed, applies pending migrations and returns
// the store. It owns conn from then on: Close closes it.
func Open(ctx context.Context, conn Conn, cfg Config) (*Store, error) {
	if !chschema.ValidIdentifier(cfg.Database) {
		return nil, fmt.Errorf("open store: invalid database name %q", cfg.Database)
	}
	version, err := conn.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("open store: read server version: %w", err)
	}
	features, err := chschema.FeaturesFor(version)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{conn: conn, db: cfg.Database, cluster: cfg.Cluster, features: features}
	if s.features.MergeSelector, err = s.hasMergeTreeSettings(ctx, chschema.MergeSelectorSettings); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if s.features.CompressBlocks, err = s.hasMergeTreeSettings(ctx, chschema.CompressBlockSettings); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.migrate(ctx, cfg.TTLDays); err != nil {
		return nil, err
	}
	return s, nil
}

// hasMergeTreeSettings reports whether the server knows every one of the
// MergeTree settings names (constants of chschema: quoted as they are).
func (s *Store) hasMergeTreeSettings(ctx context.Context, names []string) (bool, error) {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	var n uint64
	if err := s.queryOne(ctx, "SELECT count() FROM system.merge_tree_settings WHERE name IN ("+strings.Join(quoted, ", ")+")", nil, &n); err != nil {
		return false, fmt.Errorf("read merge tree settings: %w", err)
	}
	return n == uint64(len(names)), nil
}

// Features returns the version-gated features in use.
func (s *Store) Features() chschema.Features { return s.features }

// Cluster returns the cluster the schema is on, or "" for one server.
func (s *Store) Cluster() string { return s.cluster }

// Database returns the database name.
func (s *Store) Database() string { return s.db }

// migrate applies every migration newer than the recorded version. Each
// applied migration is recorded in schema_migrations; applying twice is a
// no-op because recorded versions are skipped and every statement is
// idempotent (IF NOT EXISTS), so a crash between a statement and its record
// is repaired by the next start.
//
// On a cluster, a store whose schema is current runs no DDL at all: ON
// CLUSTER statements wait for every host, so a restart while a replica is
// down would otherwise wait for distributed_ddl_task_timeout. Two stores
// that migrate at once both run the statements (the second finds each
// table there, and each column added: see applyOnCluster) and both record
// each version, as identical rows that ZooKeeper keeps once.
func (s *Store) migrate(ctx context.Context, ttlDays int) error {
	p := chschema.DDLParams{Database: s.db, Features: s.features, TTLDays: ttlDays, Cluster: s.cluster}
	migrations, err := chschema.Migrations(p)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		s.known = max(s.known, m.Version)
	}
	if s.cluster != "" {
		if applied, err := s.appliedVersion(ctx); err == nil && applied >= s.known {
			return nil
		}
	}
	if err := s.exec(ctx, chschema.CreateDatabase(p)); err != nil {
		return fmt.Errorf("create database %s: %w", s.db, err)
	}
	if err := s.exec(ctx, chschema.MigrationsTable(p)); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied, err := s.appliedVersion(ctx)
	if err != nil {
		return err
	}
	if s.cluster != "" && applied == 0 {
		fresh, err := s.noTables(ctx)
		if err != nil {
			return err
		}
		if fresh {
			err := s.createFolded(ctx, p, migrations)
			if err == nil || errors.Is(err, errQueued) || ctx.Err() != nil {
				return err
			}
			// Another store found this database's first tables and
			// began migrating it one migration at a time, and its
			// CREATE of a table in its first form reached the DDL
			// queue before the folded one: the folded statement that
			// reads a later column of it then fails ("Unknown
			// identifier"). One migration at a time is right whatever
			// the database holds.
		}
	}
	for _, m := range migrations {
		if m.Version <= applied {
			continue
		}
		for _, stmt := range m.Statements {
			if err := s.exec(ctx, stmt); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.Name, err)
			}
		}
		if err := s.record(ctx, m); err != nil {
			return err
		}
	}
	if s.cluster != "" {
		return s.waitForRecords(ctx)
	}
	return nil
}

// record records migration m as applied.
func (s *Store) record(ctx context.Context, m chschema.Migration) error {
	row := migrationRow{version: uint32(m.Version), name: m.Name, appliedNs: uint64(time.Now().UnixNano())}
	if s.cluster != "" {
		// The record must be the same bytes whoever writes it, for the
		// replicated table's block deduplication to keep one of two
		// stores' records: it carries no time on a cluster
		// (system.part_log and the DDL queue in ZooKeeper have it).
		row.appliedNs = 0
	}
	if err := insertOne(ctx, s, &migrationsTable, row); err != nil {
		return fmt.Errorf("record migration %s: %w", m.Name, err)
	}
	return nil
}

// noTables reports whether the database holds none of budgetd's tables
// (schema_migrations aside) on the host the store is connected to; ON
// CLUSTER statements create a table on every host or on none.
func (s *Store) noTables(ctx context.Context) (bool, error) {
	var n uint64
	err := s.queryOne(ctx, "SELECT count() FROM system.tables WHERE database = {db:String} AND name != 'schema_migrations'",
		Params{P("db", s.db)}, &n)
	if err != nil {
		return false, fmt.Errorf("list the tables of %s: %w", s.db, err)
	}
	return n == 0, nil
}

// createFolded creates a new database's schema on a cluster with every
// added column in its table's CREATE (chschema.Folded), then records every
// migration. A store that opens the database meanwhile finds tables, and
// migrates one migration at a time over them. Its statements share the
// DDL queue with these and can reach it first; when that makes one of
// these fail, migrate goes on one migration at a time too.
func (s *Store) createFolded(ctx context.Context, p chschema.DDLParams, migrations []chschema.Migration) error {
	for _, stmt := range chschema.Folded(p, migrations) {
		if err := s.exec(ctx, stmt); err != nil {
			return fmt.Errorf("create the schema of %s: %w", s.db, err)
		}
	}
	for _, m := range migrations {
		if err := s.record(ctx, m); err != nil {
			return err
		}
	}
	return s.waitForRecords(ctx)
}

// waitForRecords waits until this host's replica of schema_migrations
// shows every version: a record another store wrote first through another
// host drops this store's identical one, and arrives here when this
// replica fetches it, a moment later. Until then SchemaVersion would call
// the schema behind (readyz, the start log).
func (s *Store) waitForRecords(ctx context.Context) error {
	for {
		applied, err := s.appliedVersion(ctx)
		if err != nil {
			return err
		}
		if applied >= s.known {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("wait for this host's replica of %s.schema_migrations to show version %d (it shows %d): %w", s.db, s.known, applied, ctx.Err())
		}
	}
}

// exec runs one DDL statement; on a cluster, through applyOnCluster.
func (s *Store) exec(ctx context.Context, stmt string) error {
	if s.cluster == "" {
		return s.conn.Exec(ctx, stmt, nil)
	}
	return s.applyOnCluster(ctx, stmt)
}

// errQueued marks an ON CLUSTER statement that not every host ran in time.
var errQueued = errors.New("it stays queued for the hosts that have not run it, and a start when they are back finishes the migration")

// applyOnCluster runs an ON CLUSTER statement, which ClickHouse queues in
// ZooKeeper and every host of the cluster runs; the call returns when all
// have, or fails after the server's distributed_ddl_task_timeout (180 s by
// default) when one has not — a host that is down runs the statement from
// the queue when it is back.
//
// ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: a column another store
// added first (two stores migrating at once, or a host that ran the queued
// statement before a crash kept it from being recorded) fails with "column
// with this name already exists" on the hosts that have it, after the
// others have added it, so that error means the column is there
// everywhere.
func (s *Store) applyOnCluster(ctx context.Context, stmt string) error {
	err := s.conn.Exec(ctx, stmt, nil)
	switch {
	case err == nil:
		return nil
	case strings.Contains(stmt, " ADD COLUMN ") && strings.Contains(err.Error(), "column with this name already exists"):
		return nil
	case strings.Contains(err.Error(), "distributed_ddl_task_timeout"):
		return fmt.Errorf("run on cluster %s: not every host ran the statement within the server's distributed_ddl_task_timeout"+
			" (is every host of remote_servers up?); %w: %w", s.cluster, errQueued, err)
	// The driver's socket deadline is the context's, and under load it can
	// fire (and the driver report DeadlineExceeded) a moment before the
	// context itself is done.
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("run on cluster %s: not every host ran the statement before the deadline"+
			" (is every host of remote_servers up?); %w: %w", s.cluster, errQueued, wrapCtx(ctx, err))
	}
	return fmt.Errorf("run on cluster %s: %w", s.cluster, err)
}

func (s *Store) appliedVersion(ctx context.Context) (int, error) {
	var v uint32
	err := s.queryOne(ctx, "SELECT toUInt32(max(version)) FROM "+s.db+".schema_migrations", nil, &v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v), nil
}

// SchemaVersion implements store.Store.
func (s *Store) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	applied, err = s.appliedVersion(ctx)
	return applied, s.known, err
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	var one uint8
	if err := s.queryOne(ctx, "SELECT toUInt8(1)", nil, &one); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error { return s.conn.Close() }

// queryOne runs a query expected to return exactly one row.
func (s *Store) queryOne(ctx context.Context, query string, params Params, dest ...any) error {
	rows, err := s.conn.Query(ctx, query, params)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return store.ErrNotFound
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Err()
}

// validToken reports whether a dedup token is safe to pass as a setting.
func validToken(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	for _, r := range t {
		if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// insert writes rows 0..n-1 of a batch (row(i) is row i) into t as one
// INSERT of blocks of up to InsertBlockRows rows, deduplicated by token
// (once).
func insert[R any](ctx context.Context, s *Store, t *table[R], token string, n int, row func(int) R) error {
	if n == 0 {
		return nil
	}
	err := s.once(ctx, token, t.name, uint64(n), func(dedup string) error {
		blk := s.spare.take(t.name)
		if blk == nil {
			var err error
			if blk, err = t.newBlock(); err != nil {
				return err
			}
		}
		err := s.conn.Insert(ctx, s.db+"."+t.name, blocksOf(t, blk, n, row), dedup)
		s.spare.keep(t.name, blk)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", t.name, err)
	}
	return nil
}

// once runs write (one insert of rows rows) once per token: by the
// engine's insert_deduplication_token where the server has it (write gets
// the token to pass), otherwise through the batches table, where the
// token is looked up under recordAs before and recorded after (write gets
// no token).
func (s *Store) once(ctx context.Context, token, recordAs string, rows uint64, write func(dedup string) error) error {
	if !validToken(token) {
		return fmt.Errorf("invalid dedup token %q", token)
	}
	if s.features.DedupToken {
		return write(token)
	}
	seen, err := s.recorded(ctx, token, recordAs)
	if err != nil {
		return fmt.Errorf("check dedup token: %w", err)
	}
	if seen {
		return nil
	}
	if err := write(""); err != nil {
		return err
	}
	if err := insertOne(ctx, s, &batchesTable, batchRow{token: token, table: recordAs, rows: rows, writtenNs: uint64(time.Now().UnixNano())}); err != nil {
		return fmt.Errorf("record dedup token: %w", err)
	}
	return nil
}

// recorded reports whether the batches table holds token under tbl: a
// written batch of that table, or another record a write keeps there
// (spansAttempt).
func (s *Store) recorded(ctx context.Context, token, tbl string) (bool, error) {
	var n uint64
	err := s.queryOne(ctx, "SELECT count() FROM "+s.db+".batches WHERE token = {token:String} AND tbl = {tbl:String}",
		Params{P("token", token), P("tbl", tbl)}, &n)
	return n > 0, err
}

// insertOne writes a single row into t with no dedup token: the store's
// own bookkeeping (applied migrations, written batches).
func insertOne[R any](ctx context.Context, s *Store, t *table[R], r R) error {
	blk, err := t.newBlock()
	if err != nil {
		return err
	}
	return s.conn.Insert(ctx, s.db+"."+t.name, blocksOf(t, blk, 1, func(int) R { return r }), "")
}

// InsertBlockRows is the most rows of one block of an insert. A batch is
// sent as several blocks of one INSERT rather than one block of all its
// rows, so the block kept for the next insert (spareBlocks) holds this
// many rows' string headers and offsets, not the largest batch's: under
// the harness's load the spans' one block was 33 MB of Go heap and the
// hops' 17, live between inserts, which Go's collector doubles.
const InsertBlockRows = 4096

// blocksOf returns the blocks of rows 0..n-1 of t (row(i) is row i),
// each refilled into blk and checked that every column holds its rows: a
// block the engine misread would store wrong values rather than fail.
func blocksOf[R any](t *table[R], blk *Block, n int, row func(int) R) Blocks {
	i := 0
	return func() (*Block, error) {
		if i == n {
			return nil, nil
		}
		blk.Reset()
		for end := min(n, i+InsertBlockRows); i < end; i++ {
			t.appendRow(blk, row(i))
		}
		if err := blk.check(); err != nil {
			return nil, fmt.Errorf("build %s block: %w", t.name, err)
		}
		return blk, nil
	}
}

// spareBlocks keeps the last block built for each table, with its column
// buffers, for the next insert into that table: growing a block of
// InsertBlockRows rows from nothing for every insert would allocate its
// buffers about twice over. A sync.Pool would not do: the collector
// empties it every cycle or two, and under load that is every second.
type spareBlocks struct {
	mu      sync.Mutex
	byTable map[string]*Block
}

// maxSpareBlockBytes is the largest block kept, so one block of huge rows
// does not pin its memory for good.
const maxSpareBlockBytes = 64 << 20

// take returns table's spare block, empty, or nil when there is none.
func (p *spareBlocks) take(table string) *Block {
	p.mu.Lock()
	defer p.mu.Unlock()
	blk := p.byTable[table]
	delete(p.byTable, table)
	return blk
}

// keep empties blk and keeps it as table's spare block.
func (p *spareBlocks) keep(table string, blk *Block) {
	blk.Reset()
	if blk.capBytes() > maxSpareBlockBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTable == nil {
		p.byTable = make(map[string]*Block)
	}
	p.byTable[table] = blk
}

// maxPartitionsPerInsert bounds the day partitions one INSERT touches.
// ClickHouse refuses a block that spans more than
// max_partitions_per_insert_block (100 by default) with "Too many
// partitions for single INSERT block" — a refusal no retry can cure, so a
// batch of spans from a backfill or from senders with skewed clocks is
// split before it gets there. 50 leaves room for servers that lower the
// setting.
const maxPartitionsPerInsert = 50

// maxInsertBytes bounds the estimated size of one INSERT block. A span's
// row carries its resource's attributes, which the batch shares between
// spans in memory but the block repeats per row: 20,000 spans of a
// resource with 1,024 attributes of 2 KiB would be a 40 GB block. The
// engines hold a block (and its parse) in memory at once.
const maxInsertBytes = 64 << 20

// insertParts is insert for budgetd's big tables: a batch whose rows fall
// on more than maxPartitionsPerInsert UTC days (dayNs(i) is row i's time,
// the tables' partition key), or whose rows add up to more than
// maxInsertBytes (rowBytes(i) estimates row i), is written as several
// inserts, each under the batch's token with its part number, so a retry of
// the batch renders the same parts under the same tokens.
func insertParts[R any](ctx context.Context, s *Store, t *table[R], token string, n int,
	dayNs func(int) uint64, rowBytes func(int) int, row func(int) R) error {
	parts := splitRows(n, dayNs, rowBytes, maxPartitionsPerInsert, maxInsertBytes)
	if parts == nil {
		return insert(ctx, s, t, token, n, row)
	}
	for p, rows := range parts {
		err := insert(ctx, s, t, token+"-p"+strconv.Itoa(p), len(rows), func(i int) R { return row(rows[i]) })
		if err != nil {
			return err
		}
	}
	return nil
}

// splitRows groups the row numbers 0..n-1 into parts of at most maxDays
// consecutive UTC days (of dayNs) and about maxBytes (of rowBytes; a row
// larger than that is a part alone), keeping row order within a part. It
// returns nil when all rows fit in one part.
func splitRows(n int, dayNs func(int) uint64, rowBytes func(int) int, maxDays, maxBytes int) [][]int {
	const nsPerDay = uint64(24 * time.Hour)
	// The common batch falls on one or two days: tell that without a map.
	lo, hi, total := ^uint64(0), uint64(0), 0
	for i := range n {
		d := dayNs(i) / nsPerDay
		lo, hi = min(lo, d), max(hi, d)
		total += rowBytes(i)
	}
	if n == 0 || hi-lo < uint64(maxDays) && total <= maxBytes {
		return nil
	}
	days := make(map[uint64]int)
	for i := range n {
		days[dayNs(i)/nsPerDay] = 0
	}
	sorted := make([]uint64, 0, len(days))
	for d := range days {
		sorted = append(sorted, d)
	}
	slices.Sort(sorted)
	for rank, d := range sorted {
		days[d] = rank / maxDays
	}
	byDays := make([][]int, (len(sorted)+maxDays-1)/maxDays)
	for i := range n {
		p := days[dayNs(i)/nsPerDay]
		byDays[p] = append(byDays[p], i)
	}
	var parts [][]int
	for _, rows := range byDays {
		start, size := 0, 0
		for j, i := range rows {
			b := rowBytes(i)
			if j > start && size+b > maxBytes {
				parts = append(parts, rows[start:j])
				start, size = j, 0
			}
			size += b
		}
		parts = append(parts, rows[start:])
	}
	if len(parts) == 1 {
		return nil // days far apart, but few of them and few bytes
	}
	return parts
}

// CheckWritable inserts one row into the batches table, which reads
// consult only by the token of a real batch: it proves that the engine
// takes inserts, so a writer can tell spans the engine refuses from an
// engine that refuses everything.
func (s *Store) CheckWritable(ctx context.Context) error {
	err := insertOne(ctx, s, &batchesTable, batchRow{token: "probe", table: "probe", writtenNs: uint64(time.Now().UnixNano())})
	if err != nil {
		return wrapCtx(ctx, fmt.Errorf("check the store takes writes: %w", err))
	}
	return nil
}

// wrapCtx makes an engine error that happened because the context ended
// match ctx.Err() with errors.Is, whatever the engine reported.
func wrapCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// inList renders n placeholders named prefix0..prefixN-1 of type typ, for IN (…).
func inList(prefix, typ string, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{%s%d:%s}", prefix, i, typ)
	}
	return b.String()
}

// countable lists the tables CountRows may be asked about.
var countable = map[string]bool{"spans": true, "trace_index": true, "hops": true, "findings": true, "schema_migrations": true}

// CountRows returns the raw row count of one of budgetd's tables, duplicates
// included. Tests and the crash checks use it to prove exactly-once storage.
func (s *Store) CountRows(ctx context.Context, table string) (uint64, error) {
	if !countable[table] {
		return 0, fmt.Errorf("count rows: unknown table %q", table)
	}
	var n uint64
	if err := s.queryOne(ctx, "SELECT count() FROM "+s.db+"."+table, nil, &n); err != nil {
		return 0, wrapCtx(ctx, fmt.Errorf("count %s: %w", table, err))
	}
	return n, nil
}

// Conn returns the engine connection the store runs on.
func (s *Store) Conn() Conn { return s.conn }
