package problems

import (
	"errors"
	"fmt"
	"time"
)

// Config is the `problems` section: how problems are grouped for the API
// and watched for alerts and notifications.
type Config struct {
	// QuietPeriod is how long a problem goes unseen before it is resolved
	// (and, seen again after that, regressed).
	QuietPeriod time.Duration `yaml:"quiet_period"`
	// TrendInterval is the width of a problem's trend buckets.
	TrendInterval time.Duration `yaml:"trend_interval"`
	// MaxExamples bounds the example traces of a problem.
	MaxExamples int `yaml:"max_examples"`
	// MaxFindings bounds the findings one grouping reads (the newest); an
	// answer that reached it says truncated.
	MaxFindings int `yaml:"max_findings"`
	// ExamplesPerInterval bounds the trace findings stored in full per
	// problem and trend interval; the rest are counted in the problem's
	// stats only.
	ExamplesPerInterval int `yaml:"examples_per_interval"`
	// Watch evaluates the problems periodically for metrics, alerts and
	// notifications.
	Watch WatchConfig `yaml:"watch"`
}

// WatchConfig is the `problems.watch` section.
type WatchConfig struct {
	// Every is how often the problems are evaluated.
	Every time.Duration `yaml:"every"`
	// Lookback is the window of findings each evaluation groups; it must
	// exceed the quiet period, or nothing could ever be seen to regress.
	Lookback time.Duration `yaml:"lookback"`
	// Top is how many problems (active or regressed, by impact) get series
	// of their own; the rest are summed into one series labelled "other".
	Top int `yaml:"top"`
	// Webhook, when its URL is set, receives every new, regressed and
	// resolved problem.
	Webhook WebhookConfig `yaml:"webhook"`
}

// WebhookConfig is the `problems.watch.webhook` section.
type WebhookConfig struct {
	// URL receives a POST per notification; "" turns notifications off.
	URL string `yaml:"url"`
	// Format is "alertmanager" (the Alertmanager v2 API's list of alerts,
	// so the URL may be an Alertmanager's /api/v2/alerts) or "json" (one
	// {"event", "problem"} object).
	Format string `yaml:"format"`
	// Timeout bounds one POST.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAttempts is how often one notification is tried before it is
	// dropped (counted); the wait between tries doubles from one second.
	MaxAttempts int `yaml:"max_attempts"`
	// QueueSize bounds the notifications waiting to be sent; when full the
	// oldest is dropped (counted).
	QueueSize int `yaml:"queue_size"`
	// LinkBase, when set, is the UI's address (e.g. https://budgetd.internal):
	// notifications link to the problem's page under it.
	LinkBase string `yaml:"link_base"`
}

// The webhook formats.
const (
	FormatAlertmanager = "alertmanager"
	FormatJSON         = "json"
)

// DefaultConfig returns the problems defaults.
func DefaultConfig() Config {
	return Config{
		QuietPeriod: DefaultQuietPeriod, TrendInterval: 5 * time.Minute, MaxExamples: DefaultMaxExamples, MaxFindings: 100_000,
		ExamplesPerInterval: 20,
		Watch: WatchConfig{
			Every: time.Minute, Lookback: 24 * time.Hour, Top: 20,
			Webhook: WebhookConfig{Format: FormatAlertmanager, Timeout: 10 * time.Second, MaxAttempts: 5, QueueSize: 1000},
		},
	}
}

// Validate reports every setting that cannot work, naming its key.
func (c Config) Validate() error {
	var errs []error
	positive := func(key string, ok bool) {
		if !ok {
			errs = append(errs, fmt.Errorf("problems.%s must be > 0", key))
		}
	}
	positive("quiet_period", c.QuietPeriod > 0)
	positive("trend_interval", c.TrendInterval > 0)
	positive("max_examples", c.MaxExamples > 0)
	positive("max_findings", c.MaxFindings > 0)
	positive("examples_per_interval", c.ExamplesPerInterval > 0)
	positive("watch.every", c.Watch.Every > 0)
	positive("watch.top", c.Watch.Top > 0)
	if c.Watch.Lookback <= c.QuietPeriod {
		errs = append(errs, errors.New("problems.watch.lookback must be longer than problems.quiet_period"))
	}
	if w := c.Watch.Webhook; w.URL != "" {
		if w.Format != FormatAlertmanager && w.Format != FormatJSON {
			errs = append(errs, fmt.Errorf("problems.watch.webhook.format must be %s or %s, got %q", FormatAlertmanager, FormatJSON, w.Format))
		}
		positive("watch.webhook.timeout", w.Timeout > 0)
		positive("watch.webhook.max_attempts", w.MaxAttempts > 0)
		positive("watch.webhook.queue_size", w.QueueSize > 0)
	}
	return errors.Join(errs...)
}

// Options returns the grouping options of c, judged at now, with the
// requests per path for the share and the stats of the window.
func (c Config) Options(now time.Time, pathRequests map[string]uint64, stats []Stat) Options {
	return Options{Now: now, Interval: c.TrendInterval, QuietPeriod: c.QuietPeriod, MaxExamples: c.MaxExamples,
		PathRequests: pathRequests, Stats: stats}
}
