package analyze

import (
	"errors"
	"math"
	"time"
)

// Config is what a user sets for the detectors (the analyze section of the
// YAML configuration, or flags of `budgetd analyze`).
type Config struct {
	// SkewToleranceMs is how far, in milliseconds, two hosts' clocks (or
	// one host's wall clock, stepped by time synchronisation) may disagree
	// before budgetd believes a timing. Overruns, budget increases, and
	// timeouts or retry policies past the time left below it are ignored,
	// and a server span that sticks out of its client by less than it is
	// not shifted.
	SkewToleranceMs float64 `yaml:"skew_tolerance_ms" json:"skew_tolerance_ms"`
	// RetryAmplificationThreshold is the number of calls of one leaf edge in
	// one trace at which retry_amplification fires even when retries
	// multiplied at a single level only.
	RetryAmplificationThreshold int `yaml:"retry_amplification_threshold" json:"retry_amplification_threshold"`
	// EdgeWindow is how far back the per-edge statistics reach (latency
	// quantiles, median timeout, call and retry counts). The window slides in
	// steps of a tenth of EdgeWindow.
	EdgeWindow time.Duration `yaml:"edge_window" json:"edge_window"`
	// MinEdgeSamples is the number of latency samples an edge needs before
	// its quantiles are trusted: latency_inversion and the p50 test of
	// retry_without_budget stay silent below it.
	MinEdgeSamples int `yaml:"min_edge_samples" json:"min_edge_samples"`
	// MaxEdges bounds the number of edges an Analyzer tracks. Samples of
	// further edges are refused and counted (Counters.RefusedSamples) until
	// old edges fall out of the window.
	MaxEdges int `yaml:"max_edges" json:"max_edges"`
	// Infer configures zero-instrumentation inference: timeouts and
	// deadlines estimated from timing where the spans record none.
	Infer InferConfig `yaml:"infer" json:"infer"`
}

// The defaults of DefaultConfig.
const (
	defaultSkewToleranceMs             = 5
	defaultRetryAmplificationThreshold = 3
	defaultEdgeWindow                  = 15 * time.Minute
	defaultMinEdgeSamples              = 20
	defaultMaxEdges                    = 10000
)

// minEdgeWindow is the shortest window Validate accepts. Shorter windows
// would make slices of a few milliseconds, which is never what anyone wants
// for latency statistics.
const minEdgeWindow = time.Second

// maxSkewToleranceMs bounds the tolerance to one hour: beyond that no overrun
// would ever be reported, which is a configuration mistake, not a choice.
const maxSkewToleranceMs = 3_600_000

// DefaultConfig returns the configuration of DESIGN §5: a 5 ms skew
// tolerance, amplification at 3 calls, a 15-minute edge window, 20 samples
// before edge quantiles count, and at most 10,000 tracked edges.
func DefaultConfig() Config {
	return Config{
		SkewToleranceMs:             defaultSkewToleranceMs,
		RetryAmplificationThreshold: defaultRetryAmplificationThreshold,
		EdgeWindow:                  defaultEdgeWindow,
		MinEdgeSamples:              defaultMinEdgeSamples,
		MaxEdges:                    defaultMaxEdges,
		Infer:                       DefaultInferConfig(),
	}
}

// Validate reports every setting that cannot work, each message naming its
// configuration key.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.SkewToleranceMs) || c.SkewToleranceMs < 0 {
		errs = append(errs, errors.New("analyze.skew_tolerance_ms must be >= 0"))
	} else if c.SkewToleranceMs > maxSkewToleranceMs {
		errs = append(errs, errors.New("analyze.skew_tolerance_ms must be <= 3600000 (one hour)"))
	}
	if c.RetryAmplificationThreshold < 2 {
		errs = append(errs, errors.New("analyze.retry_amplification_threshold must be >= 2"))
	}
	if c.EdgeWindow < minEdgeWindow {
		errs = append(errs, errors.New("analyze.edge_window must be >= 1s"))
	}
	if c.MinEdgeSamples < 1 {
		errs = append(errs, errors.New("analyze.min_edge_samples must be >= 1"))
	}
	if c.MaxEdges < 1 {
		errs = append(errs, errors.New("analyze.max_edges must be >= 1"))
	}
	if c.Infer.MinSamples < 1 {
		errs = append(errs, errors.New("analyze.infer.min_samples must be >= 1"))
	}
	if math.IsNaN(c.Infer.MinConfidence) || c.Infer.MinConfidence < 0 || c.Infer.MinConfidence > 1 {
		errs = append(errs, errors.New("analyze.infer.min_confidence must be between 0 and 1"))
	}
	return errors.Join(errs...)
}

// sanitized returns c with every setting Validate would reject replaced by
// its default, so that New and Analyze never misbehave on a configuration
// their caller forgot to validate.
func (c Config) sanitized() Config {
	d := DefaultConfig()
	if math.IsNaN(c.SkewToleranceMs) || c.SkewToleranceMs < 0 || c.SkewToleranceMs > maxSkewToleranceMs {
		c.SkewToleranceMs = d.SkewToleranceMs
	}
	if c.RetryAmplificationThreshold < 2 {
		c.RetryAmplificationThreshold = d.RetryAmplificationThreshold
	}
	if c.EdgeWindow < minEdgeWindow {
		c.EdgeWindow = d.EdgeWindow
	}
	if c.MinEdgeSamples < 1 {
		c.MinEdgeSamples = d.MinEdgeSamples
	}
	if c.MaxEdges < 1 {
		c.MaxEdges = d.MaxEdges
	}
	if c.Infer.MinSamples < 1 {
		c.Infer.MinSamples = d.Infer.MinSamples
	}
	if math.IsNaN(c.Infer.MinConfidence) || c.Infer.MinConfidence < 0 || c.Infer.MinConfidence > 1 {
		c.Infer.MinConfidence = d.Infer.MinConfidence
	}
	return c
}

// toleranceNs is the skew tolerance in nanoseconds.
func (c Config) toleranceNs() int64 { return int64(math.Round(c.SkewToleranceMs * 1e6)) }
