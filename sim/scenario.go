package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"
)

// The timeout policies a client or hop can follow.
const (
	// PolicyIndependent: every call has a fixed timeout chosen by its hop
	// alone; nothing is propagated.
	PolicyIndependent = "independent"
	// PolicyLadder: fixed timeouts like independent, which must strictly
	// decrease from the edge down (Validate checks it).
	PolicyLadder = "ladder"
	// PolicyDeadline: one budget set at the edge, propagated as the
	// remaining milliseconds in x-request-timeout-ms and spent by every hop,
	// through package budget.
	PolicyDeadline = "deadline"
)

// MaxScenarioBytes bounds a scenario file; a real one is a few kilobytes.
const MaxScenarioBytes = 1 << 20

// Defaults applied by Parse to keys a scenario leaves out.
const (
	defaultTimeScale     = 1.0
	defaultRequests      = 30
	defaultConcurrency   = 10
	defaultDefaultBudget = 5 * time.Second
	defaultDegradedCode  = 503
)

// Scenario is a chain of services as a scenario file describes it: a client
// at the edge calling the first hop, each hop calling the next, the last one
// (the leaf, typically a database) calling nothing. Durations are scenario
// time; Run multiplies them by TimeScale.
type Scenario struct {
	// Name identifies the scenario in output and, with --demo, prefixes its
	// service names. Letters, digits, '.', '_' and '-'.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Policy is the default timeout policy of the client and every hop.
	Policy string `yaml:"policy"`
	// TimeScale is real time per scenario time: 0.05 runs a 30 s timeout
	// in 1.5 s. Default 1.
	TimeScale float64 `yaml:"time_scale"`
	// Requests is how many requests the client sends (default 30) and
	// Concurrency how many are in flight at once (default 10).
	Requests    int `yaml:"requests"`
	Concurrency int `yaml:"concurrency"`
	// Seed seeds the random draws of work, latency and transit.
	Seed   uint64 `yaml:"seed"`
	Client Client `yaml:"client"`
	Hops   []Hop  `yaml:"hops"`
}

// Client is the edge: the user's device or browser. It has no server; each
// request is a root span with the edge budget, and the call into the first
// hop.
type Client struct {
	Service   string `yaml:"service"`
	Operation string `yaml:"operation"`
	Policy    string `yaml:"policy"`
	// EdgeBudget is how long the user waits in all (required for the
	// deadline policy). Recorded as budget.remaining_ms with
	// budget.source=edge on the root span. For the other policies it
	// defaults to what the call's retry policy can take:
	// attempts·timeout + (attempts−1)·backoff.
	EdgeBudget time.Duration `yaml:"edge_budget"`
	// Think is the pause of each of the Concurrency users before each of
	// their requests, so requests in flight together do not start (and
	// time out) in lockstep.
	Think Dist `yaml:"think"`
	Call  Call `yaml:"call"`
}

// Hop is one service of the chain.
type Hop struct {
	Service string `yaml:"service"`
	// Operation names the hop's SERVER span (default "GET /<service>").
	Operation string `yaml:"operation"`
	Policy    string `yaml:"policy"`
	// DefaultBudget (deadline policy) is the budget of a request that
	// arrives without one: the hop resets the chain (budget.source=default).
	// Default 5s.
	DefaultBudget time.Duration `yaml:"default_budget"`
	// MinBudget (deadline policy) is the least budget worth starting the
	// work for; a request with less is refused (budget.rejected).
	MinBudget time.Duration `yaml:"min_budget"`
	// StopOnCancel says whether the hop stops when its caller leaves or its
	// deadline passes: its work, waits and calls follow the request context.
	// When false they are detached from it (context.WithoutCancel), so the
	// hop works on after nobody waits, and under the deadline policy sends
	// no budget on. Default true.
	StopOnCancel *bool `yaml:"stop_on_cancel"`
	// Work is the hop's own work before it calls the next hop (for the
	// leaf, all of its work).
	Work Dist `yaml:"work"`
	// Degraded, when set, replaces Work for a fraction of requests.
	Degraded *Degraded `yaml:"degraded"`
	// Call is the call into the next hop; the leaf has none.
	Call *Call `yaml:"call"`
}

// Degraded makes a share of a hop's requests slow, and failing unless
// Status is 200.
type Degraded struct {
	// Fraction of requests affected, 0 to 1.
	Fraction float64 `yaml:"fraction"`
	// Work replaces the hop's Work for those requests.
	Work Dist `yaml:"work"`
	// Status they are answered with (default 503).
	Status int `yaml:"status"`
}

// Call is how a client or hop calls the next hop.
type Call struct {
	// Timeout is each attempt's timeout: required for the independent and
	// ladder policies; for the deadline policy an optional cap below the
	// remaining budget (budget.Transport.Timeout).
	Timeout time.Duration `yaml:"timeout"`
	// Attempts in total, the first included (default 1), with Backoff
	// between them.
	Attempts int           `yaml:"attempts"`
	Backoff  time.Duration `yaml:"backoff"`
	// BudgetCheck retries through budget.Retry: a wait or an attempt the
	// remaining budget cannot pay for is not started, and MinAttempt is
	// the budget an attempt needs. Without it the retry loop only counts.
	BudgetCheck bool          `yaml:"budget_check"`
	MinAttempt  time.Duration `yaml:"min_attempt"`
	// Margin (deadline policy) is kept back from the budget sent on, for
	// this hop's own answer (budget.Transport.ResponseMargin).
	Margin time.Duration `yaml:"margin"`
	// Transit is the network delay of each request on its way to the
	// callee, spent inside the CLIENT span before the callee sees it.
	Transit Dist `yaml:"transit"`
}

// Load reads and validates a scenario file.
func Load(path string) (Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxScenarioBytes+1))
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario %s: %w", path, err)
	}
	if len(data) > MaxScenarioBytes {
		return Scenario{}, fmt.Errorf("read scenario %s: larger than %d bytes", path, MaxScenarioBytes)
	}
	s, err := Parse(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario, applies the defaults and validates it. Unknown
// keys are errors, so a misspelt setting is not silently ignored.
func Parse(data []byte) (Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return Scenario{}, errors.New("parse scenario: empty document")
		}
		return Scenario{}, fmt.Errorf("parse scenario: %w", err)
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return Scenario{}, err
	}
	return s, nil
}

// withDefaults returns a copy of s, sharing nothing with it, with the
// defaults applied to the keys it leaves out.
func (s Scenario) withDefaults() Scenario {
	s.Hops = append([]Hop(nil), s.Hops...)
	for i := range s.Hops {
		h := &s.Hops[i]
		if h.Degraded != nil {
			d := *h.Degraded
			h.Degraded = &d
		}
		if h.Call != nil {
			c := *h.Call
			h.Call = &c
		}
		if h.StopOnCancel != nil {
			v := *h.StopOnCancel
			h.StopOnCancel = &v
		}
	}
	s.applyDefaults()
	return s
}

func (s *Scenario) applyDefaults() {
	if s.TimeScale == 0 {
		s.TimeScale = defaultTimeScale
	}
	if s.Requests == 0 {
		s.Requests = defaultRequests
	}
	if s.Concurrency == 0 {
		s.Concurrency = defaultConcurrency
	}
	c := &s.Client
	if c.Policy == "" {
		c.Policy = s.Policy
	}
	if c.Operation == "" {
		c.Operation = "request"
	}
	if c.Call.Attempts == 0 {
		c.Call.Attempts = 1
	}
	if c.EdgeBudget == 0 && c.Policy != PolicyDeadline && c.Call.Attempts > 0 {
		c.EdgeBudget = time.Duration(c.Call.Attempts)*c.Call.Timeout + time.Duration(c.Call.Attempts-1)*c.Call.Backoff
	}
	for i := range s.Hops {
		h := &s.Hops[i]
		if h.Policy == "" {
			h.Policy = s.Policy
		}
		if h.Operation == "" {
			h.Operation = "GET /" + h.Service
		}
		if h.StopOnCancel == nil {
			yes := true
			h.StopOnCancel = &yes
		}
		if h.Policy == PolicyDeadline && h.DefaultBudget == 0 {
			h.DefaultBudget = defaultDefaultBudget
		}
		if h.Degraded != nil && h.Degraded.Status == 0 {
			h.Degraded.Status = defaultDegradedCode
		}
		if h.Call != nil && h.Call.Attempts == 0 {
			h.Call.Attempts = 1
		}
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func validPolicy(p string) bool {
	return p == PolicyIndependent || p == PolicyLadder || p == PolicyDeadline
}

// Validate reports every value that cannot work, each message naming its
// key as the file spells it.
func (s Scenario) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRE.MatchString(s.Name) {
		add("name must be letters, digits, '.', '_' or '-', got %q", s.Name)
	}
	if s.Policy != "" && !validPolicy(s.Policy) {
		add("policy must be independent, ladder or deadline, not %q", s.Policy)
	}
	if !(s.TimeScale > 0 && s.TimeScale <= 10) {
		add("time_scale must be > 0 and <= 10, got %v", s.TimeScale)
	}
	if s.Requests < 1 {
		add("requests must be >= 1, got %d", s.Requests)
	}
	if s.Concurrency < 1 {
		add("concurrency must be >= 1, got %d", s.Concurrency)
	}

	c := s.Client
	services := map[string]bool{}
	checkService := func(key, name string) {
		switch {
		case !nameRE.MatchString(name):
			add("%s.service must be letters, digits, '.', '_' or '-', got %q", key, name)
		case services[name]:
			add("%s.service %q is used twice", key, name)
		}
		services[name] = true
	}
	checkService("client", c.Service)
	if !validPolicy(c.Policy) {
		add("client.policy (or policy) must be independent, ladder or deadline, got %q", c.Policy)
	}
	if c.Policy == PolicyDeadline && c.EdgeBudget <= 0 {
		add("client.edge_budget must be > 0 for the deadline policy")
	}
	if c.EdgeBudget < 0 {
		add("client.edge_budget must be >= 0, got %v", c.EdgeBudget)
	}
	errs = append(errs, c.Think.Validate("client.think"), c.Call.validate("client.call", c.Policy))

	if len(s.Hops) == 0 {
		add("hops must list at least one service")
	}
	for i, h := range s.Hops {
		key := fmt.Sprintf("hops[%d]", i)
		checkService(key, h.Service)
		if !validPolicy(h.Policy) {
			add("%s.policy (or policy) must be independent, ladder or deadline, got %q", key, h.Policy)
		}
		if h.Policy != PolicyDeadline && (h.DefaultBudget != 0 || h.MinBudget != 0) {
			add("%s: default_budget and min_budget belong to the deadline policy", key)
		}
		if h.MinBudget < 0 || h.MinBudget > h.DefaultBudget && h.Policy == PolicyDeadline {
			add("%s.min_budget must be >= 0 and <= default_budget (%v), got %v", key, h.DefaultBudget, h.MinBudget)
		}
		if h.DefaultBudget < 0 {
			add("%s.default_budget must be >= 0, got %v", key, h.DefaultBudget)
		}
		errs = append(errs, h.Work.Validate(key+".work"))
		if d := h.Degraded; d != nil {
			if !(d.Fraction >= 0 && d.Fraction <= 1) {
				add("%s.degraded.fraction must be between 0 and 1, got %v", key, d.Fraction)
			}
			if d.Status < 100 || d.Status > 599 {
				add("%s.degraded.status must be an HTTP status, got %d", key, d.Status)
			}
			errs = append(errs, d.Work.Validate(key+".degraded.work"))
		}
		last := i == len(s.Hops)-1
		switch {
		case last && h.Call != nil:
			add("%s.call: the last hop is the leaf and calls nothing", key)
		case !last && h.Call == nil:
			add("%s.call is required: %s calls %s", key, h.Service, s.Hops[i+1].Service)
		case h.Call != nil:
			errs = append(errs, h.Call.validate(key+".call", h.Policy))
		}
	}
	errs = append(errs, s.validateLadder())
	return errors.Join(errs...)
}

func (c Call) validate(key, policy string) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Timeout < 0 || policy != PolicyDeadline && c.Timeout == 0 {
		add("%s.timeout must be > 0 for the %s policy, got %v", key, policy, c.Timeout)
	}
	if c.Attempts < 1 {
		add("%s.attempts must be >= 1, got %d", key, c.Attempts)
	}
	if c.Backoff < 0 || c.MinAttempt < 0 || c.Margin < 0 {
		add("%s: backoff, min_attempt and margin must be >= 0", key)
	}
	if c.Margin > 0 && policy != PolicyDeadline {
		add("%s.margin belongs to the deadline policy", key)
	}
	if c.MinAttempt > 0 && !c.BudgetCheck {
		add("%s.min_attempt needs budget_check: true", key)
	}
	errs = append(errs, c.Transit.Validate(key+".transit"))
	return errors.Join(errs...)
}

// validateLadder checks that the timeouts of the calls made under the ladder
// policy strictly decrease from the edge down: that is what makes it a
// ladder.
func (s Scenario) validateLadder() error {
	prev, prevKey := time.Duration(0), ""
	check := func(key, policy string, c *Call) error {
		if policy != PolicyLadder || c == nil {
			return nil
		}
		var err error
		if prevKey != "" && c.Timeout >= prev {
			err = fmt.Errorf("%s.timeout (%v) must be below %s.timeout (%v): a ladder's timeouts decrease down the chain", key, c.Timeout, prevKey, prev)
		}
		prev, prevKey = c.Timeout, key
		return err
	}
	errs := []error{check("client.call", s.Client.Policy, &s.Client.Call)}
	for i, h := range s.Hops {
		errs = append(errs, check(fmt.Sprintf("hops[%d].call", i), h.Policy, h.Call))
	}
	return errors.Join(errs...)
}

// Leaf returns the last hop, the one that calls nothing.
func (s Scenario) Leaf() Hop { return s.Hops[len(s.Hops)-1] }
