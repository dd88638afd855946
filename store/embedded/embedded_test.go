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

// TestTableSettingsOnTheEmbeddedEngine: chDB lists the merge selector's
// settings and the compressed block sizes as table settings, so the store
// sets them (migrations 0018 and 0024) and the conformance suite's checks
// of them run here rather than being skipped everywhere.
func TestTableSettingsOnTheEmbeddedEngine(t *testing.T) {
	s, err := embedded.Open(context.Background(), embedded.Config{DataDir: t.TempDir(), Database: "wide"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Features().MergeSelector {
		t.Fatal("chDB lists merge_selector_base, yet the store did not see it")
	}
	if !s.Features().CompressBlocks {
		t.Fatal("chDB lists min_compress_block_size, yet the store did not see it")
	}
}
