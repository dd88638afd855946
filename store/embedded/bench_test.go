package embedded_test

import (
	"context"
	"testing"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/storetest"
)

func BenchmarkWriteSpans(b *testing.B) {
	dir := b.TempDir()
	storetest.BenchmarkWriteSpans(b, func(ctx context.Context, database string) (*chsql.Store, error) {
		return embedded.Open(ctx, embedded.Config{DataDir: dir, Database: database})
	}, 5000)
}

func BenchmarkWriteSpansAttributes(b *testing.B) {
	dir := b.TempDir()
	storetest.BenchmarkWriteSpansAttributes(b, func(ctx context.Context, database string) (*chsql.Store, error) {
		return embedded.Open(ctx, embedded.Config{DataDir: dir, Database: database})
	}, 5000)
}

// BenchmarkWriteHops: five analysis rounds' hops of 20,000 spans each, merged
// into one part (storetest.BenchmarkWriteHops).
func BenchmarkWriteHops(b *testing.B) {
	dir := b.TempDir()
	storetest.BenchmarkWriteHops(b, func(ctx context.Context, database string) (*chsql.Store, error) {
		return embedded.Open(ctx, embedded.Config{DataDir: dir, Database: database})
	}, 20000, 5)
}
