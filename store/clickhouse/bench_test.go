package clickhouse_test

import (
	"context"
	"testing"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/storetest"
)

func BenchmarkWriteSpans(b *testing.B) {
	srv := clickhousetest.Start(b)
	storetest.BenchmarkWriteSpans(b, func(ctx context.Context, database string) (*chsql.Store, error) {
		cfg := clickhouse.DefaultConfig()
		cfg.DSN = srv.DSN(database)
		return clickhouse.Open(ctx, cfg)
	}, 5000)
}
