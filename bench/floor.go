package bench

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
)

// The floor is the least CPU this machine can spend per span receiving and
// storing the load: the Collector's cost of receiving it (measured as a
// target) plus the engine's cost of storing rows it does not have to parse,
// measured here as an INSERT … SELECT of the load's own rows in the embedded
// engine, which runs inside this process.

// InsertFloor is what one INSERT … SELECT measurement found.
type InsertFloor struct {
	Rows    uint64        // rows inserted in the measured window
	CPU     time.Duration // this process's CPU in the window, merges included
	Elapsed time.Duration // the window: first insert to merges finished
}

// CPUPerMillion is the CPU seconds per million rows inserted.
func (f InsertFloor) CPUPerMillion() float64 {
	if f.Rows == 0 {
		return 0
	}
	return f.CPU.Seconds() / (float64(f.Rows) / 1e6)
}

// Spans returns the load's spans as budgetd's ingest converts them, with
// the trace ids the requests carry now.
func (l *Load) Spans() ([]schema.Span, error) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return nil, err
	}
	var out []schema.Span
	for i := range l.reqs {
		res := conv.Convert(l.reqs[i].Traces())
		if res.Rejected > 0 {
			return nil, fmt.Errorf("convert request %d: %d spans rejected (%s)", i, res.Rejected, res.RejectReason)
		}
		out = append(out, res.Spans...)
	}
	return out, nil
}

// FillSpans writes spans through the store's own WriteSpans, in batches of
// batch spans, as budgetd's drainer writes them.
func FillSpans(ctx context.Context, st *chsql.Store, spans []schema.Span, batch int) error {
	for i := 0; i < len(spans); i += batch {
		if err := st.WriteSpans(ctx, fmt.Sprintf("floor-%d", i), spans[i:min(i+batch, len(spans))]); err != nil {
			return err
		}
	}
	return nil
}

// floorSource is the in-memory copy of the spans table's rows the measured
// inserts read: reading it costs next to nothing, so the window measures
// the insert, not a scan of compressed parts.
const floorSource = "floor_source"

// MeasureInsertFloor copies the rows of st's spans table into memory, then
// measures this process's CPU (getrusage: the embedded engine runs in it)
// while `INSERT INTO spans SELECT * FROM <the copy>` runs until at least
// minRows rows were inserted and the background merges those inserts
// caused have finished. st must be the embedded engine, its spans table
// filled (FillSpans) and nothing else writing to it.
func MeasureInsertFloor(ctx context.Context, st *chsql.Store, minRows uint64) (InsertFloor, error) {
	db := st.Database()
	source := db + "." + floorSource
	perInsert, err := copySpans(ctx, st, source)
	if err != nil {
		return InsertFloor{}, err
	}
	defer func() {
		// A copy left behind only holds memory until the engine closes.
		_ = st.Conn().Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+source, nil)
	}()
	// The fill's own merges are not part of the measurement.
	if _, _, err := cpuWhenMergesSettle(ctx, st); err != nil {
		return InsertFloor{}, err
	}
	// insert_deduplicate off: the spans table deduplicates recent blocks
	// (non_replicated_deduplication_window), and every insert here repeats
	// the same block.
	insert := "INSERT INTO " + db + ".spans SELECT * FROM " + source + " SETTINGS insert_deduplicate = 0"
	// The caller's garbage (the spans it filled the table with) is
	// collected now rather than in the window.
	runtime.GC()
	t0, cpu0 := time.Now(), processCPU()
	var rows uint64
	for rows < minRows {
		if err := st.Conn().Exec(ctx, insert, nil); err != nil {
			return InsertFloor{}, fmt.Errorf("measure insert floor: %w", err)
		}
		rows += perInsert
	}
	cpu1, t1, err := cpuWhenMergesSettle(ctx, st)
	if err != nil {
		return InsertFloor{}, err
	}
	return InsertFloor{Rows: rows, CPU: cpu1 - cpu0, Elapsed: t1.Sub(t0)}, nil
}

// copySpans makes source an in-memory copy of st's spans table and returns
// its row count.
func copySpans(ctx context.Context, st *chsql.Store, source string) (uint64, error) {
	db := st.Database()
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + source,
		"CREATE TABLE " + source + " ENGINE = Memory AS SELECT * FROM " + db + ".spans",
	} {
		if err := st.Conn().Exec(ctx, q, nil); err != nil {
			return 0, fmt.Errorf("copy spans: %w", err)
		}
	}
	n, err := countOf(ctx, st, "SELECT count() FROM "+source)
	if err != nil {
		return 0, fmt.Errorf("copy spans: %w", err)
	}
	if n == 0 {
		return 0, fmt.Errorf("copy spans: %s.spans is empty: fill it first", db)
	}
	return n, nil
}

// mergesQuietFor is how long system.merges must stay empty before the
// merges count as finished: the engine picks the next merge within a few
// hundred milliseconds of the last one ending.
const mergesQuietFor = time.Second

// cpuWhenMergesSettle polls system.merges for st's database until it has
// stayed empty for mergesQuietFor, and returns this process's CPU time and
// the time at the first empty poll of that quiet stretch: when the last
// merge had finished, before the idle wait.
func cpuWhenMergesSettle(ctx context.Context, st *chsql.Store) (time.Duration, time.Time, error) {
	var quietSince time.Time
	var cpuAtQuiet time.Duration
	for {
		n, err := countOf(ctx, st, "SELECT count() FROM system.merges WHERE database = {db:String}", chsql.P("db", st.Database()))
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("wait for merges: %w", err)
		}
		switch {
		case n > 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince, cpuAtQuiet = time.Now(), processCPU()
		case time.Since(quietSince) >= mergesQuietFor:
			return cpuAtQuiet, quietSince, nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		}
	}
}

// countOf runs a query returning one count.
func countOf(ctx context.Context, st *chsql.Store, query string, params ...chsql.Param) (uint64, error) {
	rows, err := st.Conn().Query(ctx, query, params)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n uint64
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// processCPU is the user and system CPU this process has used, all its
// threads (the embedded engine's included). getrusage(RUSAGE_SELF) fails
// only on a bad pointer or who, neither possible here.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
