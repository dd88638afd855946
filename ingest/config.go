package ingest

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/budgetd/budgetd/security"
)

// Size limits of DESIGN §6. They bound the bytes one request may hold after
// decompression, which is what memory use follows.
const (
	// DefaultGRPCMaxRecvMsgBytes is gRPC's own default message limit; the
	// OpenTelemetry exporters keep their requests under it.
	DefaultGRPCMaxRecvMsgBytes = 4 << 20
	// MaxGRPCMaxRecvMsgBytes is the largest grpc.max_recv_msg_bytes Validate
	// accepts: a decoded request takes several times its wire size.
	MaxGRPCMaxRecvMsgBytes = 64 << 20
	// DefaultHTTPMaxRequestBytes is the OTLP/HTTP request limit.
	DefaultHTTPMaxRequestBytes = 20 << 20
)

// Config is the `ingest` section of budgetd's configuration: where the OTLP
// listeners bind, how large and how slow a request may be, how spans are
// batched into the store and what a span may carry.
type Config struct {
	GRPC GRPCConfig `yaml:"grpc"`
	HTTP HTTPConfig `yaml:"http"`
	// MaxConcurrentRequests bounds the requests being decoded, converted
	// and committed at once on each transport (so senders on one port
	// cannot take the other's). A request beyond it is answered 503 /
	// UNAVAILABLE at once. A slot is taken once the request is read;
	// MaxInFlightBytes bounds the bytes of both transports together.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests"`
	// MaxInFlightBytes bounds the request memory held at once over both
	// transports — HTTP bodies as they arrive (reserved 256 KiB at a time,
	// so a slow sender holds what it sent), then each request while it is
	// decoded, converted and committed, charged for what it takes decoded:
	// estimated from the protobuf before decoding it, about 5 times its
	// bytes for realistic spans and up to 16 for attribute-heavy ones
	// (decodedsize.go), and behind the write-ahead log for the record their
	// spans are encoded into (about their protobuf's size). Beyond it
	// requests are answered 503 / UNAVAILABLE;
	// one request larger than the whole budget is taken alone.
	MaxInFlightBytes int64 `yaml:"max_in_flight_bytes"`
	// RetryAfter is the delay a refused sender is told to wait (HTTP
	// Retry-After, gRPC RetryInfo) when the queue is full or the store is
	// unavailable.
	RetryAfter time.Duration `yaml:"retry_after"`
	// Limits bounds what one span may carry.
	Limits Limits `yaml:"limits"`
	// SpanTimes bounds how far from now a span's times may be.
	SpanTimes SpanTimeWindow `yaml:"span_times"`
	// Auth requires a bearer token on every request, over both
	// transports; off unless tokens are configured.
	Auth security.AuthConfig `yaml:"auth"`
}

// GRPCConfig is the `ingest.grpc` section: the OTLP/gRPC listener.
type GRPCConfig struct {
	// Endpoint is host:port to listen on; "" disables OTLP/gRPC.
	Endpoint string `yaml:"endpoint"`
	// MaxRecvMsgBytes bounds one request after decompression; larger ones
	// get RESOURCE_EXHAUSTED.
	MaxRecvMsgBytes int `yaml:"max_recv_msg_bytes"`
	// MaxConcurrentStreams bounds the requests one connection may have in
	// flight.
	MaxConcurrentStreams uint32 `yaml:"max_concurrent_streams"`
	// ConnectionTimeout bounds a new connection's HTTP/2 handshake, so a
	// client that connects and says nothing does not hold a connection.
	ConnectionTimeout time.Duration `yaml:"connection_timeout"`
	// ReceiveTimeout bounds receiving one request's message, from the
	// stream's start, so a sender trickling its message cannot hold a
	// stream and the bytes it sent (the counterpart of
	// ingest.http.read_timeout).
	ReceiveTimeout time.Duration `yaml:"receive_timeout"`
	// MaxConnectionAge closes a connection this long after it opened
	// (after a grace for its requests in flight): nothing a sender
	// trickles is held longer.
	MaxConnectionAge time.Duration `yaml:"max_connection_age"`
	// TLS serves OTLP/gRPC over TLS, with client certificates required
	// when client_ca_file is set.
	TLS security.TLSConfig `yaml:"tls"`
}

// HTTPConfig is the `ingest.http` section: the OTLP/HTTP listener.
type HTTPConfig struct {
	// Endpoint is host:port to listen on; "" disables OTLP/HTTP.
	Endpoint string `yaml:"endpoint"`
	// MaxRequestBytes bounds one request body after decompression (and
	// before it, on the wire); larger ones get 413.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included, so a
	// sender trickling bytes cannot hold a connection and its buffer.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the response, the commit to the store included, so it
	// must exceed durability.batch.flush_interval plus the store's write time in batch mode.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// TLS serves OTLP/HTTP over TLS (HTTPS), with client certificates
	// required when client_ca_file is set.
	TLS security.TLSConfig `yaml:"tls"`
}

// DefaultConfig returns the defaults of DESIGN §6: OTLP's standard ports on
// localhost only, 4 MiB gRPC and 20 MiB HTTP requests.
func DefaultConfig() Config {
	return Config{
		GRPC: GRPCConfig{
			Endpoint:             "localhost:4317",
			MaxRecvMsgBytes:      DefaultGRPCMaxRecvMsgBytes,
			MaxConcurrentStreams: 100,
			ConnectionTimeout:    10 * time.Second,
			ReceiveTimeout:       30 * time.Second,
			MaxConnectionAge:     10 * time.Minute,
		},
		HTTP: HTTPConfig{
			Endpoint:          "localhost:4318",
			MaxRequestBytes:   DefaultHTTPMaxRequestBytes,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
		MaxConcurrentRequests: 64,
		MaxInFlightBytes:      128 << 20,
		RetryAfter:            time.Second,
		Limits:                DefaultLimits(),
		SpanTimes:             DefaultSpanTimeWindow(),
	}
}

// Validate reports the first setting that cannot work, naming its key.
func (c Config) Validate() error {
	if c.GRPC.Endpoint == "" && c.HTTP.Endpoint == "" {
		return errors.New("ingest.grpc.endpoint and ingest.http.endpoint must not both be empty")
	}
	if err := validEndpoint("ingest.grpc.endpoint", c.GRPC.Endpoint); err != nil {
		return err
	}
	if c.GRPC.MaxRecvMsgBytes <= 0 {
		return errors.New("ingest.grpc.max_recv_msg_bytes must be > 0")
	}
	if c.GRPC.MaxRecvMsgBytes > MaxGRPCMaxRecvMsgBytes {
		return fmt.Errorf("ingest.grpc.max_recv_msg_bytes must be <= %d (64 MiB)", MaxGRPCMaxRecvMsgBytes)
	}
	if c.GRPC.MaxConcurrentStreams == 0 {
		return errors.New("ingest.grpc.max_concurrent_streams must be > 0")
	}
	if c.GRPC.ConnectionTimeout <= 0 {
		return errors.New("ingest.grpc.connection_timeout must be > 0")
	}
	if err := validEndpoint("ingest.http.endpoint", c.HTTP.Endpoint); err != nil {
		return err
	}
	if c.HTTP.MaxRequestBytes <= 0 {
		return errors.New("ingest.http.max_request_bytes must be > 0")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"ingest.grpc.receive_timeout", c.GRPC.ReceiveTimeout},
		{"ingest.http.read_header_timeout", c.HTTP.ReadHeaderTimeout},
		{"ingest.http.read_timeout", c.HTTP.ReadTimeout},
		{"ingest.http.write_timeout", c.HTTP.WriteTimeout},
		{"ingest.http.idle_timeout", c.HTTP.IdleTimeout},
		{"ingest.retry_after", c.RetryAfter},
	} {
		if d.v <= 0 {
			return errors.New(d.key + " must be > 0")
		}
	}
	if c.MaxConcurrentRequests <= 0 {
		return errors.New("ingest.max_concurrent_requests must be > 0")
	}
	if limit := max(int64(c.GRPC.MaxRecvMsgBytes), c.HTTP.MaxRequestBytes); c.MaxInFlightBytes < limit {
		return fmt.Errorf("ingest.max_in_flight_bytes must be >= the largest request a listener takes (%d)", limit)
	}
	if c.GRPC.MaxConnectionAge <= 0 {
		return errors.New("ingest.grpc.max_connection_age must be > 0")
	}
	if err := c.GRPC.TLS.Validate("ingest.grpc.tls"); err != nil {
		return err
	}
	if err := c.HTTP.TLS.Validate("ingest.http.tls"); err != nil {
		return err
	}
	if err := c.Auth.Validate("ingest.auth"); err != nil {
		return err
	}
	if err := c.SpanTimes.Validate(); err != nil {
		return err
	}
	return c.Limits.Validate()
}

// validEndpoint checks that a non-empty endpoint is host:port.
func validEndpoint(key, endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(endpoint); err != nil {
		return fmt.Errorf("%s must be host:port, not %q", key, endpoint)
	}
	return nil
}
