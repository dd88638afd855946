package ingest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/logthrottle"
	"github.com/budgetd/budgetd/security"
)

// Settings are what the Server is given rather than configured with.
type Settings struct {
	// Logger receives lifecycle events and throttled warnings; nil
	// discards them. Nothing is logged per span or per request.
	Logger *slog.Logger
	// Durability commits accepted spans before they are acknowledged, and
	// hands them to the analysis once stored.
	// Required. The Server owns it from New on: Shutdown shuts it down
	// after the last request has finished.
	Durability durable.Durability
	// Registerer receives the ingest metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Server is budgetd's OTLP endpoint: OTLP/gRPC (TraceService/Export) and
// OTLP/HTTP (POST /v1/traces) listeners sharing one export path. It is a
// drop-in target for the OpenTelemetry Collector's otlp and otlphttp
// exporters and for the OpenTelemetry SDKs' exporters.
type Server struct {
	cfg  Config
	log  *slog.Logger
	conv *Converter
	dur  durable.Durability
	// reuseRequests says that dur copies the spans on Commit, so a
	// request's memory is reused once it is committed (convertProto).
	reuseRequests bool
	m             *serverMetrics
	throttle      *logthrottle.Throttle
	// tokens are ingest.auth's bearer tokens; nil accepts every request.
	tokens *security.Tokens
	// httpTLS is the OTLP/HTTP listener's TLS; nil serves plaintext.
	httpTLS *tls.Config

	// slots bound the requests in progress, per transport (grpcSlots,
	// httpSlots), so senders on one port cannot take the other's: a
	// handler puts a token in to start, takes it out when done. Shutdown
	// fills them to wait for the handlers and to keep new ones out.
	grpcSlots, httpSlots chan struct{}
	// inflight bounds the request memory held (ingest.max_in_flight_bytes).
	inflight *byteBudget

	grpc     *grpc.Server
	http     *http.Server
	gzip     gzipReaders
	buffers  bufferPool
	zstd     *zstdCompressor
	serveErr sync.WaitGroup // the Serve goroutines

	mu       sync.Mutex
	started  bool
	stopped  bool
	grpcAddr net.Addr
	httpAddr net.Addr
}

// New validates cfg and builds a Server; Start makes it listen. When New
// fails, set.Durability stays the caller's to shut down.
func New(cfg Config, set Settings) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	if set.Durability == nil {
		return nil, errors.New("create ingest server: no durability")
	}
	conv, err := NewConverter(cfg.Limits)
	if err == nil {
		conv, err = conv.WithTimeWindow(cfg.SpanTimes, time.Now)
	}
	if err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	m, err := newServerMetrics(registerer(set.Registerer))
	if err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	s := &Server{
		cfg:       cfg,
		log:       set.Logger,
		conv:      conv,
		dur:       set.Durability,
		m:         m,
		throttle:  logthrottle.New(10 * time.Second),
		grpcSlots: make(chan struct{}, cfg.MaxConcurrentRequests),
		httpSlots: make(chan struct{}, cfg.MaxConcurrentRequests),
		inflight:  &byteBudget{max: cfg.MaxInFlightBytes, gauge: m.inflightBytes},
		zstd:      newZstdCompressor(),
	}
	_, s.reuseRequests = set.Durability.(durable.CopyingDurability)
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.tokens, err = cfg.Auth.Load("ingest.auth"); err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	grpcTLS, err := cfg.GRPC.TLS.ServerConfig("ingest.grpc.tls")
	if err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	if s.httpTLS, err = cfg.HTTP.TLS.ServerConfig("ingest.http.tls"); err != nil {
		return nil, fmt.Errorf("create ingest server: %w", err)
	}
	if cfg.GRPC.Endpoint != "" {
		var creds []grpc.ServerOption
		if grpcTLS != nil {
			creds = append(creds, grpc.Creds(credentials.NewTLS(grpcTLS)))
		}
		s.grpc = s.newGRPCServer(creds...)
	}
	if cfg.HTTP.Endpoint != "" {
		s.http = &http.Server{
			Handler:           http.HandlerFunc(s.serveHTTP),
			ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
			ReadTimeout:       cfg.HTTP.ReadTimeout,
			WriteTimeout:      cfg.HTTP.WriteTimeout,
			IdleTimeout:       cfg.HTTP.IdleTimeout,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
			TLSConfig:         s.httpTLS,
		}
	}
	return s, nil
}

// Start binds the listeners and serves in the background. ctx bounds the
// binding only; Shutdown stops serving. A port of 0 picks a free port:
// Addrs tells which.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errors.New("start ingest server: already started or shut down")
	}
	var lc net.ListenConfig
	var grpcLn, httpLn net.Listener
	if s.grpc != nil {
		ln, err := lc.Listen(ctx, "tcp", s.cfg.GRPC.Endpoint)
		if err != nil {
			return fmt.Errorf("listen otlp/grpc on %s: %w", s.cfg.GRPC.Endpoint, err)
		}
		grpcLn = ln
	}
	if s.http != nil {
		ln, err := lc.Listen(ctx, "tcp", s.cfg.HTTP.Endpoint)
		if err != nil {
			if grpcLn != nil {
				_ = grpcLn.Close()
			}
			return fmt.Errorf("listen otlp/http on %s: %w", s.cfg.HTTP.Endpoint, err)
		}
		httpLn = ln
	}
	s.started = true
	if grpcLn != nil {
		s.grpcAddr = grpcLn.Addr()
		s.serveErr.Go(func() {
			if err := s.grpc.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.log.Error("otlp/grpc server failed", "err", err)
			}
		})
	}
	if httpLn != nil {
		s.httpAddr = httpLn.Addr()
		s.serveErr.Go(func() {
			serve := s.http.Serve
			if s.httpTLS != nil {
				// The certificate is in TLSConfig already; ServeTLS
				// also offers HTTP/2.
				serve = func(ln net.Listener) error { return s.http.ServeTLS(ln, "", "") }
			}
			if err := serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("otlp/http server failed", "err", err)
			}
		})
	}
	s.log.Info("otlp ingest listening", "grpc", addrString(s.grpcAddr), "http", addrString(s.httpAddr),
		"grpc_tls", s.cfg.GRPC.TLS.Enabled(), "http_tls", s.httpTLS != nil, "auth", s.tokens != nil)
	return nil
}

// Addrs returns the addresses the listeners are bound to; nil for a
// transport that is disabled or before Start.
func (s *Server) Addrs() (grpcAddr, httpAddr net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grpcAddr, s.httpAddr
}

// Shutdown stops accepting requests, lets the ones in progress finish
// (their spans are committed and answered), then shuts the Durability
// down, which writes what it still holds. When ctx ends first, requests in
// progress are cut off (their senders see an error and retry) and
// Shutdown returns ctx's error once everything has stopped. It may be
// called after a failed Start, and more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()

	var errs []error
	var mu sync.Mutex
	addErr := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	var stopping sync.WaitGroup
	if s.http != nil {
		stopping.Go(func() {
			if err := s.http.Shutdown(ctx); err != nil {
				_ = s.http.Close()
				addErr(fmt.Errorf("stop otlp/http server: %w", err))
			}
		})
	}
	if s.grpc != nil {
		stopping.Go(func() {
			graceful := make(chan struct{})
			go func() {
				s.grpc.GracefulStop()
				close(graceful)
			}()
			select {
			case <-graceful:
			case <-ctx.Done():
				// Stop cancels the handlers' contexts and, with
				// WaitForHandlers, waits for them to return.
				s.grpc.Stop()
				<-graceful
				addErr(fmt.Errorf("stop otlp/grpc server: %w", ctx.Err()))
			}
		})
	}
	stopping.Wait()
	s.serveErr.Wait()

	// http.Server.Close does not wait for handlers; taking every slot
	// does, and keeps any late handler from starting an export.
	if err := s.drainSlots(ctx); err != nil {
		addErr(err)
	}
	if err := s.dur.Shutdown(ctx); err != nil {
		addErr(fmt.Errorf("shut down durability: %w", err))
	}
	s.log.Info("otlp ingest stopped")
	return errors.Join(errs...)
}

// drainSlots takes every request slot, waiting for handlers in progress.
func (s *Server) drainSlots(ctx context.Context) error {
	for _, slots := range []chan struct{}{s.grpcSlots, s.httpSlots} {
		for range cap(slots) {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return fmt.Errorf("wait for ingest requests: %w", ctx.Err())
			}
		}
	}
	return nil
}

// acquire takes a request slot without waiting; false means the server is
// at max_concurrent_requests or shutting down.
func (s *Server) acquire(slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) release(slots chan struct{}) { <-slots }

func addrString(a net.Addr) string {
	if a == nil {
		return "disabled"
	}
	return a.String()
}
