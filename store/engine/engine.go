// Package engine opens the store engine the configuration selects. It is the
// one place that knows both engines, so nothing else imports them.
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/embedded"
)

// The engine names.
const (
	Embedded   = "embedded"
	ClickHouse = "clickhouse"
)

// Config is the `store` section of budgetd's configuration.
type Config struct {
	// Engine is embedded (chDB in-process, the default) or clickhouse.
	Engine string `yaml:"engine"`
	// Timeout bounds every store call that has no tighter deadline.
	Timeout time.Duration `yaml:"timeout"`
	// RetentionDays drops data older than this many days; 0 keeps it.
	RetentionDays int               `yaml:"retention_days"`
	Embedded      embedded.Config   `yaml:"embedded"`
	ClickHouse    clickhouse.Config `yaml:"clickhouse"`
}

// DefaultConfig returns the embedded engine with its defaults.
func DefaultConfig() Config {
	return Config{
		Engine:     Embedded,
		Timeout:    10 * time.Second,
		Embedded:   embedded.DefaultConfig(),
		ClickHouse: clickhouse.DefaultConfig(),
	}
}

// Validate reports the first invalid setting, naming its key.
func (c Config) Validate() error {
	switch c.Engine {
	case Embedded:
		if c.Embedded.DataDir == "" {
			return errors.New("store.embedded.data_dir must not be empty")
		}
		if c.Embedded.Database == "" {
			return errors.New("store.embedded.database must not be empty")
		}
	case ClickHouse:
		if c.ClickHouse.DSN == "" {
			return errors.New("store.clickhouse.dsn must not be empty")
		}
		if c.ClickHouse.DialTimeout <= 0 {
			return errors.New("store.clickhouse.dial_timeout must be > 0")
		}
		if c.ClickHouse.MaxConns <= 0 {
			return errors.New("store.clickhouse.max_conns must be > 0")
		}
		if c.ClickHouse.Cluster != "" && !chschema.ValidIdentifier(c.ClickHouse.Cluster) {
			return fmt.Errorf("store.clickhouse.cluster must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*), not %q", c.ClickHouse.Cluster)
		}
	default:
		return fmt.Errorf("store.engine must be %q or %q, not %q", Embedded, ClickHouse, c.Engine)
	}
	if c.Timeout <= 0 {
		return errors.New("store.timeout must be > 0")
	}
	if c.RetentionDays < 0 {
		return errors.New("store.retention_days must be >= 0")
	}
	return nil
}

// Open opens the configured engine and migrates its schema.
func Open(ctx context.Context, c Config) (*chsql.Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, max(c.Timeout, time.Minute))
	defer cancel()
	switch c.Engine {
	case ClickHouse:
		cfg := c.ClickHouse
		cfg.TTLDays = c.RetentionDays
		return clickhouse.Open(ctx, cfg)
	default:
		cfg := c.Embedded
		cfg.TTLDays = c.RetentionDays
		return embedded.Open(ctx, cfg)
	}
}

// Connect opens the configured engine's connection alone: no database is
// created and no migration runs on it. It is for reading tables budgetd
// does not own, such as the Collector's otel_traces; the caller closes the
// connection.
func Connect(c Config) (chsql.Conn, error) {
	switch c.Engine {
	case ClickHouse:
		conn, _, err := clickhouse.Connect(c.ClickHouse)
		if err != nil {
			return nil, err
		}
		return conn, nil
	case Embedded:
		if c.Embedded.DataDir == "" {
			return nil, errors.New("store.embedded.data_dir must not be empty")
		}
		conn, err := embedded.Connect(c.Embedded.DataDir)
		if err != nil {
			return nil, err
		}
		return conn, nil
	default:
		return nil, fmt.Errorf("store.engine must be %q or %q, not %q", Embedded, ClickHouse, c.Engine)
	}
}
