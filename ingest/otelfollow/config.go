package otelfollow

import (
	"errors"
	"fmt"
	"time"

	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/oteltraces"
)

// Config is the `follow.otel_traces` section. An empty Source turns
// following off.
type Config struct {
	// Source is the exporter's ClickHouse server,
	// clickhouse://[user[:password]@]host:port[/DATABASE], or a chDB data
	// directory (which must be store.embedded.data_dir when budgetd's own
	// store is embedded: chDB runs one engine per process).
	Source string `yaml:"source"`
	// Table is the exporter's table, TABLE or DATABASE.TABLE.
	Table string `yaml:"table"`
	// Settle is how long after a trace's latest span ended it is taken:
	// longer than the exporter's batching and retries, so its spans are in
	// the table by then.
	Settle time.Duration `yaml:"settle"`
	// Poll is how often the table is asked for due traces.
	Poll time.Duration `yaml:"poll"`
	// Since is how far back the first start begins; later starts resume
	// from the stored position.
	Since time.Duration `yaml:"since"`
	// MaxTraceDuration bounds the scan for due traces to spans starting at
	// most this long before the position; a longer trace is read from
	// there on.
	MaxTraceDuration time.Duration `yaml:"max_trace_duration"`
	// MaxSpansPerPoll bounds the spans one poll reads, and so holds in
	// memory (about 1–2 KiB each, converted); the rest of the window is
	// taken by the next polls, at once, whole traces at a time.
	MaxSpansPerPoll int `yaml:"max_spans_per_poll"`
	// Timeout bounds each call to the source and to budgetd's store.
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultConfig returns following off, with the defaults it runs with when
// a source is set.
func DefaultConfig() Config {
	return Config{
		Table:            "otel_traces",
		Settle:           time.Minute,
		Poll:             5 * time.Second,
		Since:            time.Hour,
		MaxTraceDuration: 10 * time.Minute,
		MaxSpansPerPoll:  20_000,
		Timeout:          30 * time.Second,
	}
}

// Enabled reports whether a source is configured.
func (c Config) Enabled() bool { return c.Source != "" }

// Validate reports every setting that cannot work, naming its key. With no
// source it checks nothing: the section is off.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if _, err := c.source(); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"settle", c.Settle}, {"poll", c.Poll}, {"since", c.Since}, {"max_trace_duration", c.MaxTraceDuration}, {"timeout", c.Timeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("follow.otel_traces.%s must be > 0", d.key))
		}
	}
	if c.MaxSpansPerPoll <= 0 {
		errs = append(errs, errors.New("follow.otel_traces.max_spans_per_poll must be > 0"))
	}
	return errors.Join(errs...)
}

// source parses Source and Table.
func (c Config) source() (oteltraces.Source, error) {
	src, err := oteltraces.ParseSource(c.Source, c.Table)
	if err != nil {
		return src, fmt.Errorf("follow.otel_traces.source/table: %w", err)
	}
	for _, id := range []struct{ what, name string }{{"database", src.Database}, {"table", src.Table}} {
		if !chschema.ValidIdentifier(id.name) {
			return src, fmt.Errorf("follow.otel_traces.table: %s %q is not a plain identifier", id.what, id.name)
		}
	}
	return src, nil
}
