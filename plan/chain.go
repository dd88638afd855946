package plan

import (
	"errors"
	"fmt"
	"time"
)

// Bounds on a chain. They keep the arithmetic far from overflow (attempts ×
// timeout fits an int64 of nanoseconds many times over) and reject input that
// cannot be a real chain.
const (
	MaxHops     = 64
	MaxAttempts = 100
	MaxDuration = 24 * time.Hour
)

// Chain is a planned chain of hops in call order. The first hop is where the
// budget is set.
type Chain struct {
	// Budget is the client's end-to-end budget, received by the first hop.
	Budget time.Duration
	Hops   []Hop
	// Notes are remarks on how the chain was built (FromStore explains its
	// sources and gaps there); Check copies them into the Plan.
	Notes []string
}

// Hop is one hop of a chain. Timeout, Attempts, Backoff and P50 describe how
// the hop is called; OwnWork, Transit and Slack what it spends of each
// attempt before passing the rest down.
type Hop struct {
	Name string
	// OwnWork is the hop's own processing time.
	OwnWork time.Duration
	// Transit is the allowance for the network time of the hop's downstream
	// call, at a high percentile.
	Transit time.Duration
	// Slack is explicit headroom on top of OwnWork and Transit.
	Slack time.Duration
	// Timeout is the per-attempt timeout the caller configured; 0 when not
	// configured.
	Timeout time.Duration
	// Attempts is how many times the caller may call the hop; 0 and 1 both
	// mean a single attempt.
	Attempts int
	// Backoff is the wait between two attempts.
	Backoff time.Duration
	// P50 is the observed median latency of one attempt; 0 when unknown.
	P50 time.Duration
}

// attempts returns the number of attempts, at least 1.
func (h Hop) attempts() int { return max(h.Attempts, 1) }

// allowance is what the hop spends of each attempt before passing down.
func (h Hop) allowance() time.Duration { return h.OwnWork + h.Transit + h.Slack }

// Validate reports the first invalid field, naming it the way the chain file
// does ("hops[2] (order).retry.attempts must be 1..100").
func (c Chain) Validate() error {
	if c.Budget <= 0 || c.Budget > MaxDuration {
		return fmt.Errorf("budget must be > 0 and at most %s", MaxDuration)
	}
	if len(c.Hops) == 0 {
		return errors.New("hops must list at least one hop")
	}
	if len(c.Hops) > MaxHops {
		return fmt.Errorf("hops must list at most %d hops, not %d", MaxHops, len(c.Hops))
	}
	seen := make(map[string]int, len(c.Hops))
	for i, h := range c.Hops {
		if h.Name == "" {
			return fmt.Errorf("hops[%d].name must not be empty", i)
		}
		at := fmt.Sprintf("hops[%d] (%s)", i, h.Name)
		if j, dup := seen[h.Name]; dup {
			return fmt.Errorf("%s.name repeats hops[%d]: hop names must be unique", at, j)
		}
		seen[h.Name] = i
		// Zero means "not set" for the optional timeout and p50, so only
		// negative figures are wrong here.
		for _, d := range []struct {
			key string
			v   time.Duration
		}{
			{"own_work", h.OwnWork},
			{"transit", h.Transit},
			{"slack", h.Slack},
			{"timeout", h.Timeout},
			{"retry.backoff", h.Backoff},
			{"p50", h.P50},
		} {
			if d.v < 0 || d.v > MaxDuration {
				return fmt.Errorf("%s.%s must be >= 0 and at most %s", at, d.key, MaxDuration)
			}
		}
		if h.Attempts < 0 || h.Attempts > MaxAttempts {
			return fmt.Errorf("%s.retry.attempts must be 1..%d", at, MaxAttempts)
		}
	}
	return nil
}
