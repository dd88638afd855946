package budget

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how soon Retry may try a call again. The
// budget (the context deadline) says whether it can afford to: every wait
// and every attempt is paid from it.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in total, the first included;
	// less than 1 counts as 1.
	MaxAttempts int
	// Backoff is the longest wait before the second attempt. The wait
	// before each further attempt doubles, up to MaxBackoff. Each wait is
	// drawn at random between half its ceiling and the ceiling, so callers
	// that failed together do not retry together, and a retry never follows
	// at once.
	Backoff time.Duration
	// MaxBackoff caps the doubling; when it is not above Backoff, every wait
	// uses Backoff.
	MaxBackoff time.Duration
	// MinAttempt is the budget an attempt needs to be worth starting: the
	// call's expected latency (its p50 or p90) plus the Transport's
	// ResponseMargin. An attempt, or a wait, that would leave less is not
	// started. Zero only requires some budget to be left.
	MinAttempt time.Duration
	// Retryable reports whether an attempt's error is worth another
	// attempt. Nil retries every error except those matching
	// ErrBudgetExhausted or context.Canceled. Retry stops regardless once
	// the context is done.
	Retryable func(error) bool
}

// Retry calls call until it succeeds, the policy runs out of attempts, the
// error is not retryable, ctx is done, or the remaining budget cannot pay
// for the next wait plus MinAttempt. It returns nil on success and otherwise
// the last attempt's error. When it stopped for lack of budget, the error
// also matches ErrBudgetExhausted (and the last error still matches with
// errors.Is); when no attempt could start at all, it is only that.
//
// A context without a deadline has no budget to check: only MaxAttempts
// bounds the retries then.
//
// call receives the attempt number (from 1) and a context carrying it, which
// Transport and GRPCClient read to record budget.attempt, budget.max_attempts
// and budget.backoff_ms on each attempt's CLIENT span. call must turn
// failures it wants retried, such as a 503 response, into errors.
func Retry(ctx context.Context, p RetryPolicy, call func(ctx context.Context, attempt int) error) error {
	maxAttempts := max(p.MaxAttempts, 1)
	retryable := p.Retryable
	if retryable == nil {
		retryable = defaultRetryable
	}
	var last error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			wait := p.wait(attempt, rand.Float64())
			if err := p.afford(ctx, attempt, maxAttempts, wait); err != nil {
				return fmt.Errorf("%w; last error: %w", err, last)
			}
			if err := sleep(ctx, wait); err != nil {
				return fmt.Errorf("wait before attempt %d of %d: %w; last error: %w", attempt, maxAttempts, err, last)
			}
		}
		// Checked again after the wait, which may have overslept.
		if err := p.afford(ctx, attempt, maxAttempts, 0); err != nil {
			if last == nil {
				return err
			}
			return fmt.Errorf("%w; last error: %w", err, last)
		}
		err := call(WithAttempt(ctx, Attempt{Number: attempt, Max: maxAttempts, Backoff: p.Backoff}), attempt)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil || !retryable(err) {
			return err
		}
	}
	return last
}

// defaultRetryable retries everything except what another attempt cannot
// fix: a budget already spent, or a caller that went away.
func defaultRetryable(err error) bool {
	return !errors.Is(err, ErrBudgetExhausted) && !errors.Is(err, context.Canceled)
}

// wait returns the pause before attempt n (n ≥ 2): its ceiling is Backoff
// doubled n-2 times, capped at max(Backoff, MaxBackoff), and the pause lies
// in [ceiling/2, ceiling], placed by u in [0, 1).
func (p RetryPolicy) wait(n int, u float64) time.Duration {
	if p.Backoff <= 0 {
		return 0
	}
	limit := max(p.Backoff, p.MaxBackoff)
	ceiling := p.Backoff
	for i := 2; i < n && ceiling < limit; i++ {
		if ceiling > limit/2 { // Doubling would pass the cap (or overflow).
			ceiling = limit
		} else {
			ceiling *= 2
		}
	}
	half := ceiling / 2
	return half + time.Duration(u*float64(ceiling-half))
}

// afford reports, as an ErrBudgetExhausted error, when ctx's remaining budget
// cannot pay for wait and then an attempt of MinAttempt.
func (p RetryPolicy) afford(ctx context.Context, attempt, maxAttempts int, wait time.Duration) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	need := wait + max(p.MinAttempt, 0)
	if left > 0 && left >= need {
		return nil
	}
	return &exhaustedError{detail: fmt.Sprintf("start attempt %d of %d: %v left, %v needed (wait %v, attempt %v)",
		attempt, maxAttempts, left.Round(time.Microsecond), need, wait.Round(time.Microsecond), max(p.MinAttempt, 0))}
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
