package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gopkg.in/yaml.v3"
)

// Distribution names for Dist.Kind.
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistNormal    = "normal"
	DistLogNormal = "lognormal"
)

// z99 is the standard normal quantile at 0.99: a distribution given by its
// p50 and p99 has its p99 this many standard deviations above the median.
const z99 = 2.3263478740408408

// Dist is a distribution of durations, in scenario time. In YAML it is either
// a bare duration ("20ms", a fixed value) or a mapping:
//
//	{dist: fixed, value: 20ms}
//	{dist: uniform, min: 12s, max: 15s}
//	{dist: normal, mean: 14s, stddev: 300ms}   # or p50 and p99
//	{dist: lognormal, p50: 150ms, p99: 600ms}
//
// Normal and lognormal draws are clamped to [0, max] (max optional). The
// zero Dist is a fixed zero.
type Dist struct {
	Kind   string        `yaml:"dist"`
	Value  time.Duration `yaml:"value"`
	Min    time.Duration `yaml:"min"`
	Max    time.Duration `yaml:"max"`
	Mean   time.Duration `yaml:"mean"`
	StdDev time.Duration `yaml:"stddev"`
	P50    time.Duration `yaml:"p50"`
	P99    time.Duration `yaml:"p99"`
}

// UnmarshalYAML accepts a bare duration as a fixed distribution.
func (d *Dist) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: want a duration such as 20ms or a distribution mapping, got %q", n.Line, n.Value)
		}
		*d = Dist{Kind: DistFixed, Value: v}
		return nil
	}
	type plain Dist // without this method, so Decode does not recurse
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*d = Dist(p)
	return nil
}

// Validate reports what makes d unusable; key names d in the messages.
func (d Dist) Validate(key string) error {
	var errs []error
	neg := func(name string, v time.Duration) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s.%s must be >= 0, got %v", key, name, v))
		}
	}
	for name, v := range map[string]time.Duration{"value": d.Value, "min": d.Min, "max": d.Max, "mean": d.Mean, "stddev": d.StdDev, "p50": d.P50, "p99": d.P99} {
		neg(name, v)
	}
	switch d.Kind {
	case "", DistFixed:
	case DistUniform:
		if d.Max < d.Min {
			errs = append(errs, fmt.Errorf("%s.max must be >= %s.min", key, key))
		}
	case DistNormal:
		byP := d.P50 > 0 || d.P99 > 0
		if byP && (d.Mean > 0 || d.StdDev > 0) {
			errs = append(errs, fmt.Errorf("%s: give mean and stddev, or p50 and p99, not both", key))
		}
		if byP && d.P99 < d.P50 {
			errs = append(errs, fmt.Errorf("%s.p99 must be >= %s.p50", key, key))
		}
		if !byP && d.Mean <= 0 {
			errs = append(errs, fmt.Errorf("%s.mean (or p50 and p99) must be > 0 for a normal distribution", key))
		}
	case DistLogNormal:
		if d.P50 <= 0 || d.P99 < d.P50 {
			errs = append(errs, fmt.Errorf("%s: a lognormal distribution needs p50 > 0 and p99 >= p50", key))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.dist must be fixed, uniform, normal or lognormal, not %q", key, d.Kind))
	}
	return errors.Join(errs...)
}

// Sample draws one duration from d using r.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	var v float64
	switch d.Kind {
	case DistUniform:
		v = float64(d.Min) + r.Float64()*float64(d.Max-d.Min)
	case DistNormal:
		mean, sd := float64(d.Mean), float64(d.StdDev)
		if d.P50 > 0 || d.P99 > 0 {
			mean, sd = float64(d.P50), float64(d.P99-d.P50)/z99
		}
		v = mean + sd*r.NormFloat64()
	case DistLogNormal:
		mu := math.Log(float64(d.P50))
		sigma := (math.Log(float64(d.P99)) - mu) / z99
		v = math.Exp(mu + sigma*r.NormFloat64())
	default:
		return d.Value
	}
	v = max(v, 0)
	if d.Max > 0 && d.Kind != DistUniform {
		v = min(v, float64(d.Max))
	}
	return time.Duration(v)
}
