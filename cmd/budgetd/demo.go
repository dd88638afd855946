package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/pipeline"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// loadDemo writes the demo fixtures into the store as if they had just
// arrived, analyses them and returns how many spans it loaded. Each load
// gives the traces fresh ids and moves them to end now, so the default
// one-hour windows of the API and UI show them and a second load adds a
// second copy instead of colliding with the first.
func loadDemo(ctx context.Context, st store.Store, analysis *pipeline.Pipeline, now time.Time) (int, error) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return 0, err
	}
	var spans []schema.Span
	for _, name := range fixtures.Demo {
		data, err := fixtures.Read(name)
		if err != nil {
			return 0, fmt.Errorf("load demo %s: %w", name, err)
		}
		traces, err := ingest.DecodeTraces(data)
		if err != nil {
			return 0, fmt.Errorf("load demo %s: %w", name, err)
		}
		var fixture []schema.Span
		for _, td := range traces {
			fixture = append(fixture, conv.Convert(td).Spans...)
		}
		// Each fixture is moved on its own: their recorded dates differ, and
		// the edge statistics only look back one window.
		rebase(fixture, now)
		spans = append(spans, fixture...)
	}
	if len(spans) == 0 {
		return 0, nil
	}
	token := "demo-" + rand.Text()
	if err := st.WriteSpans(ctx, token, spans); err != nil {
		return 0, fmt.Errorf("load demo: %w", err)
	}
	analysis.Spans(spans)
	if err := analysis.Flush(ctx); err != nil {
		return 0, fmt.Errorf("analyse demo: %w", err)
	}
	return len(spans), nil
}

// rebase gives every trace a fresh random id and shifts all times so the
// latest span ends at now, keeping every interval as recorded.
func rebase(spans []schema.Span, now time.Time) {
	var last uint64
	for _, s := range spans {
		last = max(last, s.EndNs, s.StartNs)
	}
	shift := int64(now.UnixNano()) - int64(last)
	move := func(ns uint64) uint64 { return uint64(int64(ns) + shift) }
	ids := map[schema.TraceID]schema.TraceID{}
	for i := range spans {
		s := &spans[i]
		id, ok := ids[s.TraceID]
		if !ok {
			_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
			ids[s.TraceID] = id
		}
		s.TraceID = id
		s.StartNs, s.EndNs = move(s.StartNs), move(s.EndNs)
		for j := range s.Events {
			s.Events[j].TimeNs = move(s.Events[j].TimeNs)
		}
		// x-request-deadline headers are absolute; shifting spans without
		// them would turn deadlines into nonsense, so they move as well.
		for j, a := range s.Attrs {
			if a.Key == schema.AttrHeaderRequestDeadline {
				s.Attrs[j] = shiftDeadline(a, shift)
			}
		}
	}
}

// shiftDeadline moves an absolute epoch-millisecond deadline header by shift
// nanoseconds; values it cannot read are left alone.
func shiftDeadline(a schema.Attr, shift int64) schema.Attr {
	v, err := budgetread.HeaderValue(a)
	if err != nil {
		return a
	}
	ms, err := budgetread.ParseMillis(v)
	if err != nil {
		return a
	}
	return schema.Strings(a.Key, fmt.Sprintf("%d", int64(ms)+shift/1e6))
}
