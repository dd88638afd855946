package api

import (
	"errors"
	"time"

	"github.com/budgetd/budgetd/security"
)

// Config is the `api` section.
type Config struct {
	// Endpoint is where the API listens. Loopback unless configured.
	Endpoint string `yaml:"endpoint"`
	// DefaultTimeout is a request's store deadline when it sets no timeout.
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	// MaxTimeout caps the timeout parameter.
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// MaxRows caps the rows a paths or edges response returns.
	MaxRows int `yaml:"max_rows"`
	// DefaultWindow is the look-back of window queries with no since.
	DefaultWindow time.Duration `yaml:"default_window"`
	// Auth requires a bearer token on every route but /healthz and
	// /readyz (and /metrics with public_metrics); off unless tokens are
	// configured.
	Auth AuthConfig `yaml:"auth"`
	// TLS serves the API over HTTPS.
	TLS security.TLSConfig `yaml:"tls"`
	// Pprof serves Go's profiler under /debug/pprof/ (behind api.auth like
	// the rest). Off by default: profiles expose internals and cost CPU.
	Pprof bool `yaml:"pprof"`
}

// AuthConfig is the `api.auth` section.
type AuthConfig struct {
	security.AuthConfig `yaml:",inline"`
	// PublicMetrics leaves /metrics open to scrapers without a token.
	PublicMetrics bool `yaml:"public_metrics"`
}

// DefaultConfig returns the API defaults.
func DefaultConfig() Config {
	return Config{
		Endpoint:       "localhost:8080",
		DefaultTimeout: 10 * time.Second,
		MaxTimeout:     60 * time.Second,
		MaxRows:        1000,
		DefaultWindow:  time.Hour,
	}
}

// Validate reports every setting that cannot work, naming its key.
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, errors.New("api.endpoint must not be empty"))
	}
	if c.DefaultTimeout <= 0 {
		errs = append(errs, errors.New("api.default_timeout must be > 0"))
	}
	if c.MaxTimeout < c.DefaultTimeout {
		errs = append(errs, errors.New("api.max_timeout must be >= api.default_timeout"))
	}
	if c.MaxRows <= 0 {
		errs = append(errs, errors.New("api.max_rows must be > 0"))
	}
	if c.DefaultWindow <= 0 {
		errs = append(errs, errors.New("api.default_window must be > 0"))
	}
	if err := c.Auth.Validate("api.auth"); err != nil {
		errs = append(errs, err)
	}
	if err := c.TLS.Validate("api.tls"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
