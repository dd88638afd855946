package embedded_test

import (
	"context"
	"testing"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/storetest"
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	storetest.Run(t, storetest.Harness{
		Open: func(ctx context.Context, database string) (*chsql.Store, error) {
			return embedded.Open(ctx, embedded.Config{DataDir: dir, Database: database})
		},
		SlowQuery: "SELECT sleepEachRow(1) FROM numbers(10) SETTINGS max_block_size = 1",
	})
}
