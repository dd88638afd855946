package chsql

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// heldBytes is what blk's columns hold filled: the headers of its strings
// (16 bytes each) and their bytes, which the encoded block and the
// engine's parse copy, and the fixed-width values and array offsets.
func heldBytes(blk *Block) int {
	n := 0
	for i := range blk.Columns {
		c := &blk.Columns[i]
		for _, s := range c.Strings {
			n += 16 + len(s)
		}
		n += len(c.Int8s) + len(c.UInt8s) + 4*len(c.UInt32s) +
			8*(len(c.UInt64s)+len(c.Float64s)+len(c.Offsets)+len(c.Inner)) + len(c.Nulls)
	}
	return n
}

// TestSpanSizerCoversTheBlock: the estimate writers bound a store write by
// (store.SpanSizer) is at least what the spans' insert block holds, and not
// far above it, for spans of every shape. It counted 17 bytes an attribute
// and 160 a row while the block held 33 and about 384, so a batch of
// 1,000-attribute spans built a block twice its bound
// (TestDecodedRequestMemory's peak RSS). The hops' estimate
// (hopRowBytes) shares the row overhead and is held to the same.
func TestSpanSizerCoversTheBlock(t *testing.T) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	shop := conv.Convert(ingesttest.Spans(1, 1000)).Spans

	wide := make([]schema.Span, 200)
	for i := range wide {
		wide[i] = schema.Span{TraceID: schema.TraceID{1, byte(i)}, SpanID: schema.SpanID{2, byte(i)}, Service: "attributes", Name: "op"}
		for a := range 1000 {
			wide[i].Attrs = append(wide[i].Attrs, schema.Str(strconv.Itoa(a), ""))
		}
	}

	resource := schema.Attributes{schema.Str("service.name", "big"), schema.Str("blob", strings.Repeat("r", 4096))}
	evented := make([]schema.Span, 300)
	for i := range evented {
		evented[i] = schema.Span{TraceID: schema.TraceID{3, byte(i)}, SpanID: schema.SpanID{4, byte(i)}, ParentSpanID: schema.SpanID{5},
			Service: "big", Name: "GET /items/{id}", StatusMessage: "deadline exceeded", ResourceAttrs: resource,
			Attrs:  schema.Attributes{schema.Str("http.route", "/items/{id}"), schema.Int("http.status_code", 504)},
			Events: []schema.Event{{TimeNs: 1, Name: "exception", Attrs: schema.Attributes{schema.Str("exception.message", strings.Repeat("m", 300))}}, {TimeNs: 2, Name: "retry"}},
			Links:  []schema.Link{{TraceID: schema.TraceID{6}, SpanID: schema.SpanID{7}, Attrs: schema.Attributes{schema.Str("link", "x")}}},
		}
	}

	for _, c := range []struct {
		name  string
		spans []schema.Span
	}{{"the harness's shop spans", shop}, {"1,000 empty attributes", wide}, {"events, links and a 4 KiB resource", evented}} {
		blk := fill(t, &spansTable, pointers(c.spans)...)
		var size store.SpanSizer
		estimate := 0
		for i := range c.spans {
			estimate += size.Bytes(&c.spans[i])
		}
		held := heldBytes(blk)
		t.Logf("%s: estimate %d, block %d bytes (%.2f×)", c.name, estimate, held, float64(estimate)/float64(held))
		require.GreaterOrEqual(t, estimate, held, "%s: the estimate covers the block", c.name)
		require.LessOrEqual(t, float64(estimate), 1.5*float64(held), "%s: the estimate is not far above the block", c.name)
	}

	hops := make([]schema.Hop, 100)
	estimate := 0
	for i := range hops {
		hops[i] = schema.Hop{TraceID: schema.TraceID{1, byte(i)}, SpanID: schema.SpanID{2, byte(i)}, Service: "checkout",
			Operation: "POST /orders", Path: "frontend>checkout", RootPath: "frontend", CallerService: "frontend",
			CallerOperation: "POST /checkout", CalleeService: "payment", CalleeOperation: "POST /charges",
			RemainingMs: schema.Ms(5), BudgetSource: "grpc-timeout"}
		estimate += hopRowBytes(&hops[i])
	}
	held := heldBytes(fill(t, &hopsTable, pointers(hops)...))
	t.Logf("hops: estimate %d, block %d bytes (%.2f×)", estimate, held, float64(estimate)/float64(held))
	require.GreaterOrEqual(t, estimate, held, "hops: the estimate covers the block")
	require.LessOrEqual(t, float64(estimate), 1.5*float64(held), "hops: the estimate is not far above the block")
}

// pointers returns a pointer to each of rows, as the tables take them.
func pointers[R any](rows []R) []*R {
	ps := make([]*R, len(rows))
	for i := range rows {
		ps[i] = &rows[i]
	}
	return ps
}
