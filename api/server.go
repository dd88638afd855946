package api

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/security"
	"github.com/budgetd/budgetd/store"
)

//go:embed openapi.yaml
var openAPI []byte

// Settings are what the API is given rather than configured with.
type Settings struct {
	Logger     *slog.Logger
	Store      store.Store
	Gatherer   prometheus.Gatherer   // served at /metrics; nil serves an empty registry
	Registerer prometheus.Registerer // for the API's own metrics; nil: not registered
	Now        func() time.Time      // nil: time.Now
	// Ready are further readiness checks: /readyz answers 503 with the
	// first one's error while it fails (the write-ahead log's drain
	// reports a stall this way).
	Ready []func() error
	// Warnings are shown by /readyz (which stays ready): configuration a
	// person should look at, such as a listener open to other hosts
	// without a token or TLS.
	Warnings []string
	// Problems groups findings for GET /problems; the zero value takes
	// problems.DefaultConfig.
	Problems *problems.Config
}

// Server is the HTTP server of the API.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	ready    []func() error
	warnings []string
	now      func() time.Time
	// problemsCfg groups findings for GET /problems.
	problemsCfg problems.Config
	engine      *gin.Engine
	http        *http.Server
	ln          net.Listener
	served      chan error
	metrics     *apiMetrics
	tokens      *security.Tokens // nil: no authentication
	tls         *tls.Config      // nil: plaintext
}

// New builds the API. It does not listen until Start.
func New(cfg Config, set Settings) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set.Store == nil {
		return nil, errors.New("new api: a store is required")
	}
	s := &Server{cfg: cfg, log: set.Logger, store: set.Store, ready: set.Ready, warnings: set.Warnings, now: set.Now,
		problemsCfg: problems.DefaultConfig()}
	if set.Problems != nil {
		s.problemsCfg = *set.Problems
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	m, err := newAPIMetrics(set.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.tokens, err = cfg.Auth.Load("api.auth"); err != nil {
		return nil, err
	}
	if s.tls, err = cfg.TLS.ServerConfig("api.tls"); err != nil {
		return nil, err
	}
	gatherer := set.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}

	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(gin.Recovery(), s.observe, s.authenticate, s.boundParams)
	e.HandleMethodNotAllowed = true
	e.NoRoute(func(c *gin.Context) { s.writeError(c, &notFound{"no such route"}) })
	e.NoMethod(func(c *gin.Context) { s.writeError(c, badParam("method", "%s is not allowed here", c.Request.Method)) })

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	v1 := e.Group("/api/v1")
	v1.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", openAPI) })
	v1.GET("/findings", s.findings)
	v1.GET("/paths", s.paths)
	v1.GET("/edges", s.edges)
	v1.GET("/traces/:trace_id", s.trace)
	v1.GET("/summary", s.summary)
	v1.GET("/problems", s.problems)
	v1.GET("/problems/:id", s.problem)
	if err := s.mountUI(e); err != nil {
		return nil, err
	}
	if cfg.Pprof {
		e.GET("/debug/pprof/*profile", gin.WrapF(servePprof))
	}
	s.engine = e
	return s, nil
}

// notFound is an error for a missing route.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Is(target error) bool {
	return target == store.ErrNotFound
}

// Handler returns the API as an http.Handler (tests, embedding).
func (s *Server) Handler() http.Handler { return s.engine }

// Start listens on api.endpoint and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Endpoint)
	if err != nil {
		return fmt.Errorf("listen api on %s: %w", s.cfg.Endpoint, err)
	}
	s.ln = ln
	s.http = &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.cfg.MaxTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         s.tls,
	}
	s.served = make(chan error, 1)
	if s.tls != nil {
		go func() { s.served <- s.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { s.served <- s.http.Serve(ln) }()
	}
	return nil
}

// Addr returns the bound address (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting requests and waits for those in flight, within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	err := s.http.Shutdown(ctx)
	if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// authenticate answers 401 to a request without an accepted bearer token.
// Probes stay open so an orchestrator needs no credentials; /metrics too
// when api.auth.public_metrics is set.
func (s *Server) authenticate(c *gin.Context) {
	if s.tokens == nil {
		return
	}
	switch c.Request.URL.Path {
	case "/healthz", "/readyz":
		return
	case "/metrics":
		if s.cfg.Auth.PublicMetrics {
			return
		}
	}
	if !s.tokens.Check(c.GetHeader("Authorization")) {
		security.Challenge(c.Writer)
		s.writeError(c, security.ErrUnauthenticated)
	}
}

// maxParamBytes bounds one query parameter value. No filter needs more
// (service names, paths and cursors are far shorter), and a value inlined
// into SQL must keep the statement under the server's max_query_size
// (256 KiB): the 18.16 server inlines parameters, some more than once.
const maxParamBytes = 4096

// boundParams refuses a request with an over-long query parameter.
func (s *Server) boundParams(c *gin.Context) {
	for name, values := range c.Request.URL.Query() {
		for _, v := range values {
			if len(v) > maxParamBytes {
				s.writeError(c, badParam(name, "longer than %d bytes", maxParamBytes))
				return
			}
		}
	}
}

// observe counts requests by route pattern and status class; the route
// pattern (never the raw URL) keeps label cardinality bounded.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	s.metrics.requests.WithLabelValues(route, strconv.Itoa(c.Writer.Status())).Inc()
	s.metrics.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
}

type apiMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newAPIMetrics(reg prometheus.Registerer) (*apiMetrics, error) {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_api_requests_total", Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "budgetd_api_request_duration_seconds", Help: "API request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"route"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register api metrics: %w", err)
			}
		}
	}
	return m, nil
}
