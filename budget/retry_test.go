package budget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

var errUnavailable = errors.New("service unavailable")

// flaky is a real HTTP callee that answers 503 to its first failures
// requests and 200 afterwards, counting the requests that reached it.
type flaky struct {
	calls    atomic.Int32
	failures int32
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if f.calls.Add(1) <= f.failures {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// get is a retried call's body: one GET, with a 503 turned into an error.
func get(client *http.Client, url string) func(ctx context.Context, attempt int) error {
	return func(ctx context.Context, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable {
			return fmt.Errorf("get %s: %w", url, errUnavailable)
		}
		return nil
	}
}

func TestRetryIsNotStartedWhenBudgetCannotPay(t *testing.T) {
	tr := newTracing(t)
	callee := &flaky{failures: 100}
	ts := tr.server(t, "svc", budget.DefaultServerConfig(), callee)
	client := tr.client(t, &budget.Transport{ResponseMargin: 5 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The wait before attempt 2 is at least 500 ms: more than the whole budget.
	p := budget.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MinAttempt: 50 * time.Millisecond}
	err := budget.Retry(ctx, p, get(client, ts.URL))

	require.ErrorIs(t, err, budget.ErrBudgetExhausted, "stopped for lack of budget")
	require.ErrorIs(t, err, errUnavailable, "and still reports what the last attempt got")
	require.ErrorContains(t, err, "start attempt 2 of 3")
	require.Equal(t, int32(1), callee.calls.Load(), "one attempt, no retry")
	require.NoError(t, ctx.Err(), "it gave up at once rather than waiting out the budget")
}

func TestRetryFirstAttemptNeedsMinAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	var calls int
	err := budget.Retry(ctx, budget.RetryPolicy{MaxAttempts: 3, MinAttempt: time.Second},
		func(context.Context, int) error {
			calls++
			return nil
		})
	require.ErrorIs(t, err, budget.ErrBudgetExhausted)
	require.ErrorContains(t, err, "start attempt 1 of 3")
	require.Zero(t, calls)
}

func TestRetryRecordsAttemptsOnClientSpans(t *testing.T) {
	tr := newTracing(t)
	callee := &flaky{failures: 100}
	ts := tr.server(t, "svc", budget.DefaultServerConfig(), callee)
	client := tr.client(t, &budget.Transport{ResponseMargin: 5 * time.Millisecond})

	ctx, parent := tr.tp.Tracer("test").Start(context.Background(), "checkout")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p := budget.RetryPolicy{MaxAttempts: 3, Backoff: 5 * time.Millisecond, MinAttempt: 10 * time.Millisecond}
	err := budget.Retry(ctx, p, get(client, ts.URL))
	parent.End()
	ts.Close()

	require.ErrorIs(t, err, errUnavailable)
	require.NotErrorIs(t, err, budget.ErrBudgetExhausted, "it ran out of attempts, not of budget")
	require.Equal(t, int32(3), callee.calls.Load())

	calls := tr.children(tr.spanNamed(t, "checkout"), trace.SpanKindClient)
	require.Len(t, calls, 3)
	var attempts []int64
	for _, c := range calls {
		attempts = append(attempts, mustAttr(t, c, budget.AttrAttempt).AsInt64())
		require.Equal(t, int64(3), mustAttr(t, c, budget.AttrMaxAttempts).AsInt64())
		require.Equal(t, float64(5), floatAttr(t, c, budget.AttrBackoffMs))
	}
	slices.Sort(attempts)
	require.Equal(t, []int64{1, 2, 3}, attempts)
}

func TestRetryOutcomes(t *testing.T) {
	errFatal := errors.New("bad request")
	tests := []struct {
		name      string
		policy    budget.RetryPolicy
		results   []error // what each attempt returns; the last repeats
		wantCalls int
		wantErr   error
	}{
		{
			name:      "success after a failure",
			policy:    budget.RetryPolicy{MaxAttempts: 3, Backoff: time.Millisecond},
			results:   []error{errUnavailable, nil},
			wantCalls: 2,
		},
		{
			name:      "not retryable",
			policy:    budget.RetryPolicy{MaxAttempts: 3, Retryable: func(err error) bool { return !errors.Is(err, errFatal) }},
			results:   []error{errFatal},
			wantCalls: 1,
			wantErr:   errFatal,
		},
		{
			name:      "a refused call is not retried",
			policy:    budget.RetryPolicy{MaxAttempts: 3},
			results:   []error{fmt.Errorf("call: %w", budget.ErrBudgetExhausted)},
			wantCalls: 1,
			wantErr:   budget.ErrBudgetExhausted,
		},
		{
			name:      "out of attempts",
			policy:    budget.RetryPolicy{MaxAttempts: 4},
			results:   []error{errUnavailable},
			wantCalls: 4,
			wantErr:   errUnavailable,
		},
		{
			name:      "zero attempts means one",
			policy:    budget.RetryPolicy{},
			results:   []error{errUnavailable},
			wantCalls: 1,
			wantErr:   errUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var calls []int
			err := budget.Retry(ctx, tt.policy, func(_ context.Context, attempt int) error {
				calls = append(calls, attempt)
				return tt.results[min(len(calls), len(tt.results))-1]
			})
			require.Len(t, calls, tt.wantCalls)
			for i, a := range calls {
				require.Equal(t, i+1, a, "attempts are numbered from 1")
			}
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestRetryWithoutDeadlineIsBoundedByAttempts(t *testing.T) {
	var calls int
	err := budget.Retry(context.Background(), budget.RetryPolicy{MaxAttempts: 3, MinAttempt: time.Hour},
		func(context.Context, int) error {
			calls++
			return errUnavailable
		})
	require.ErrorIs(t, err, errUnavailable)
	require.Equal(t, 3, calls, "no deadline, no budget to check")
}

func TestRetryStopsWhenCallerLeavesDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	err := budget.Retry(ctx, budget.RetryPolicy{MaxAttempts: 3, Backoff: time.Hour},
		func(context.Context, int) error {
			calls++
			cancel() // The caller gives up while the first attempt fails.
			return errUnavailable
		})
	require.ErrorIs(t, err, errUnavailable)
	require.Equal(t, 1, calls)

	// Cancelled during the wait itself.
	ctx, cancel = context.WithCancel(context.Background())
	calls = 0
	time.AfterFunc(20*time.Millisecond, cancel)
	err = budget.Retry(ctx, budget.RetryPolicy{MaxAttempts: 3, Backoff: time.Hour},
		func(context.Context, int) error {
			calls++
			return errUnavailable
		})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errUnavailable)
	require.ErrorContains(t, err, "wait before attempt 2 of 3")
	require.Equal(t, 1, calls)
}
