package analyze

import (
	"math/rand"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// budgetedChain generates a chain of depth hops, each a SERVER span that
// calls the next one (the last calls a database), where every hop does what
// DESIGN §1 asks: it divides the budget it received between its attempts and
// backoffs with a margin, and passes each attempt's timeout minus transit
// down as the callee's budget. Earlier attempts fail, so every attempt's
// subtree repeats the whole chain below it.
type budgetedChain struct {
	r        *rand.Rand
	attempts []int // per call level, 0 … depth−1
	explicit bool  // number attempts with budget.attempt rather than leave them to inference
	specs    []sp
	id       int
}

const chainTransitMs = 1

func (g *budgetedChain) hop(level, parent int, start, budget float64) float64 {
	g.id++
	sid := g.id
	s := sp{id: sid, parent: parent, svc: "svc" + strconv.Itoa(level), name: "op" + strconv.Itoa(level), kind: server, start: start}
	// The budget arrives in any of the contract's forms.
	switch {
	case level == 0:
		s.attrs = attrs(rem(budget), source(schema.SourceEdge))
	case g.r.Intn(3) == 0:
		s.attrs = attrs(headerTimeoutMs(strconv.Itoa(int(budget))))
	case g.r.Intn(2) == 0:
		s.attrs = attrs(grpcTimeout(strconv.Itoa(int(budget)) + "m"))
	default:
		s.attrs = attrs(rem(budget), source(schema.SourcePropagated))
	}
	work := float64(1 + g.r.Intn(20))
	n := g.attempts[level]
	backoffMs := 0.0
	if n > 1 {
		backoffMs = float64(g.r.Intn(20))
	}
	margin := float64(1 + g.r.Intn(5))
	timeout := float64(int((budget-work-float64(n-1)*backoffMs)/float64(n))) - margin
	t := start + work
	for a := 1; a <= n; a++ {
		g.id++
		c := sp{id: g.id, parent: sid, svc: s.svc, name: "call", kind: client, start: t,
			attrs: attrs(tmo(timeout), maxAttempts(int64(n)), backoff(backoffMs))}
		if g.explicit {
			c.attrs = append(c.attrs, attempt(int64(a)))
		}
		if a < n {
			c.status = schema.StatusError
		}
		if level == len(g.attempts)-1 {
			c.attrs = append(c.attrs, peerSvc("db"))
			c.end = t + float64(1+g.r.Intn(int(min(50, timeout-1))))
		} else {
			childEnd := g.hop(level+1, c.id, t+chainTransitMs, timeout-2*chainTransitMs)
			c.end = childEnd + chainTransitMs
		}
		g.specs = append(g.specs, c)
		t = c.end
		if a < n {
			t += backoffMs
		}
	}
	s.end = t + 1
	g.specs = append(g.specs, s)
	return s.end
}

// TestBudgetedChainsAreClean is the property: for any depth from 1 to 20 and
// any per-hop attempts, a correctly budgeted chain yields no finding but
// retry amplification, and the amplification's calls are the product of the
// per-hop attempts.
func TestBudgetedChainsAreClean(t *testing.T) {
	fired := 0
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		depth := 1 + r.Intn(20)
		attempts := make([]int, depth)
		product, levels := 1, 0
		for k := range attempts {
			attempts[k] = 1
			if product < 32 && r.Intn(3) == 0 {
				attempts[k] = 2 + r.Intn(2)
				product *= attempts[k]
				levels++
			}
		}
		g := &budgetedChain{r: r, attempts: attempts, explicit: r.Intn(2) == 0}
		g.hop(0, 0, 0, 10_000_000)
		spans := build(int(seed), g.specs...)
		r.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })

		res := analyzeSpans(t, spans)
		require.Empty(t, res.Skews, "seed %d", seed)
		var amp []schema.Finding
		for _, f := range res.Findings {
			require.Equal(t, schema.KindRetryAmplification, f.Kind, "seed %d attempts %v: %s", seed, attempts, f.Message)
			amp = append(amp, f)
		}
		fires := levels >= 2 || (levels == 1 && product >= DefaultConfig().RetryAmplificationThreshold)
		if !fires {
			require.Empty(t, amp, "seed %d attempts %v", seed, attempts)
			continue
		}
		fired++
		require.Len(t, amp, 1, "seed %d attempts %v", seed, attempts)
		require.Equal(t, float64(product), amp[0].Evidence["calls"], "seed %d attempts %v", seed, attempts)
		require.Equal(t, float64(levels), amp[0].Evidence["levels"], "seed %d attempts %v", seed, attempts)
	}
	// The generator must exercise both outcomes, or the property is empty.
	require.Greater(t, fired, 30)
	require.Less(t, fired, 270)
}
