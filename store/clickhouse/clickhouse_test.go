package clickhouse_test

import (
	"context"
	"testing"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/storetest"
)

func TestConformance(t *testing.T) {
	srv := clickhousetest.Start(t)
	storetest.Run(t, storetest.Harness{
		Open: func(ctx context.Context, database string) (*chsql.Store, error) {
			cfg := clickhouse.DefaultConfig()
			cfg.DSN = srv.DSN(database)
			return clickhouse.Open(ctx, cfg)
		},
		SlowQuery: "SELECT sleepEachRow(1) FROM numbers(10) SETTINGS max_block_size = 1",
		Server:    srv,
	})
}
