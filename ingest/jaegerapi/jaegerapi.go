package jaegerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/translate"
)

// OwnService is the service name Jaeger's query service traces itself
// under (jaeger_query's enable_tracing, on by default). Read leaves it out
// when it lists the services itself: those traces are of Jaeger answering
// queries, Read's own among them, not of the system being analysed.
const OwnService = "jaeger"

// Config says which traces Read reads and how.
type Config struct {
	// URL is the query service's base URL: http or https, host and port,
	// and the base path when Jaeger has one (query.base_path); a trailing
	// slash is allowed. Credentials in it are sent as basic auth by Go's
	// HTTP client and never shown in messages.
	URL string
	// Services are the services whose traces are read. Empty: every
	// service Jaeger lists, except OwnService.
	Services []string
	// Since and Until bound the window, inclusive: a trace is read, whole,
	// when one of its spans of a service read starts inside it.
	Since, Until time.Time
	// MaxSpans stops reading once the next trace would take the spans read
	// past it; Result.Truncated then says so. Traces are kept whole.
	MaxSpans int
	// NumTraces is the query.num_traces of each request: the page size. A
	// window that returns this many traces may hold more and is split.
	NumTraces int
	// MinWindow is the width below which a full window is not split again
	// (Result.Crowded counts those).
	MinWindow time.Duration
	// RequestTimeout bounds each request, reading its answer included.
	RequestTimeout time.Duration
	// MaxAnswerBytes bounds one answer. A larger one is split like a full
	// one; in a window of MinWindow it is an error.
	MaxAnswerBytes int
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
}

// DefaultConfig returns the defaults: a million spans, like
// `budgetd analyze --from-store`; 500 traces per request, split down to a
// millisecond; a minute and 128 MiB per request. URL and the window are the
// caller's.
func DefaultConfig() Config {
	return Config{
		MaxSpans:       1_000_000,
		NumTraces:      500,
		MinWindow:      time.Millisecond,
		RequestTimeout: time.Minute,
		MaxAnswerBytes: 128 << 20,
	}
}

// Validate reports every setting that cannot work, naming the flag of
// `budgetd analyze` that sets it, or the field.
func (c Config) Validate() error {
	var errs []error
	if _, err := parseBase(c.URL); err != nil {
		errs = append(errs, err)
	}
	if c.Since.IsZero() || c.Until.IsZero() {
		errs = append(errs, errors.New("the window (--since, --until) must be set"))
	} else if c.Until.Before(c.Since) {
		errs = append(errs, errors.New("--until is before --since"))
	}
	for _, s := range c.Services {
		if s == "" {
			errs = append(errs, errors.New("--service must not be empty"))
			break
		}
	}
	if c.MaxSpans <= 0 {
		errs = append(errs, errors.New("--max-spans must be > 0"))
	}
	if c.NumTraces <= 0 {
		errs = append(errs, errors.New("jaegerapi: NumTraces must be > 0"))
	}
	if c.MinWindow <= 0 {
		errs = append(errs, errors.New("jaegerapi: MinWindow must be > 0"))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("jaegerapi: RequestTimeout must be > 0"))
	}
	if c.MaxAnswerBytes <= 0 {
		errs = append(errs, errors.New("jaegerapi: MaxAnswerBytes must be > 0"))
	}
	return errors.Join(errs...)
}

// parseBase checks a base URL and returns it without a trailing slash.
func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Not err itself: url.Error repeats the URL, password and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("--from-jaeger: not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("--from-jaeger %q: want an http:// or https:// URL", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("--from-jaeger %q: no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("--from-jaeger %q: want the base URL, without a query or fragment", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Result is what Read read.
type Result struct {
	// ConvertResult holds the spans read, in the order they were read,
	// and counts what the Converter rejected or cut, as for a trace file.
	ingest.ConvertResult
	// Traces is how many distinct traces the spans belong to.
	Traces int
	// Services are the services read; Skipped those Jaeger listed that
	// were not (OwnService).
	Services, Skipped []string
	// Requests counts the requests sent; Splits the windows split because
	// they came back full or too large.
	Requests, Splits int
	// Truncated says Read stopped at MaxSpans: traces of the window were
	// left unread.
	Truncated bool
	// Crowded counts windows of MinWindow that still returned NumTraces
	// traces: more may have started there than were read.
	Crowded int
}

// Read reads the traces cfg names from Jaeger and converts them with conv.
// It stops when ctx ends, returning an error that wraps ctx.Err().
func Read(ctx context.Context, cfg Config, conv *ingest.Converter) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	base, _ := parseBase(cfg.URL) // Validate checked it
	r := &reader{
		cfg:  cfg,
		base: base,
		conv: conv,
		// A transport of its own, closed when Read returns.
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		seen:   make(map[pcommon.TraceID]struct{}),
	}
	defer r.client.CloseIdleConnections()

	services := cfg.Services
	if len(services) == 0 {
		listed, err := r.services(ctx)
		if err != nil {
			return Result{}, err
		}
		for _, s := range listed {
			if s == OwnService {
				r.res.Skipped = append(r.res.Skipped, s)
				continue
			}
			services = append(services, s)
		}
	}
	r.res.Services = services
	if err := r.readWindows(ctx, services); err != nil {
		return Result{}, err
	}
	r.res.Rejected = r.res.Stats.Rejected()
	r.res.RejectReason = r.res.Stats.RejectReason()
	return r.res, nil
}

// reader is one Read.
type reader struct {
	cfg    Config
	base   *url.URL
	conv   *ingest.Converter
	client *http.Client
	seen   map[pcommon.TraceID]struct{} // traces already read
	spans  int                          // OTLP spans kept, against MaxSpans
	res    Result
}

// window is one FindTraces query: a service and inclusive start bounds.
type window struct {
	service      string
	since, until time.Time
}

// compareWindows orders windows by start, then service: Read goes through
// the window from its start for every service at once, so a read cut short
// by MaxSpans has covered every service up to about the same time.
func compareWindows(a, b window) int {
	if c := a.since.Compare(b.since); c != 0 {
		return c
	}
	return strings.Compare(a.service, b.service)
}

// readWindows queries every service over the whole window, splitting the
// windows that come back full, until all are read or MaxSpans is reached.
func (r *reader) readWindows(ctx context.Context, services []string) error {
	pending := make([]window, 0, len(services))
	for _, s := range services {
		pending = append(pending, window{service: s, since: r.cfg.Since, until: r.cfg.Until})
	}
	slices.SortFunc(pending, compareWindows)
	for len(pending) > 0 && !r.res.Truncated {
		w := pending[0]
		pending = pending[1:]
		a, err := r.find(ctx, w)
		if err != nil {
			return err
		}
		full := a.traces >= r.cfg.NumTraces || a.tooLarge
		if full && w.until.Sub(w.since) >= r.cfg.MinWindow {
			// The halves do not overlap (bounds are inclusive to the
			// nanosecond); a trace with spans in both is read once.
			mid := w.since.Add(w.until.Sub(w.since) / 2)
			for _, half := range []window{{w.service, w.since, mid}, {w.service, mid.Add(time.Nanosecond), w.until}} {
				i, _ := slices.BinarySearchFunc(pending, half, compareWindows)
				pending = slices.Insert(pending, i, half)
			}
			r.res.Splits++
			continue
		}
		if a.tooLarge {
			return fmt.Errorf("GET %s (service %q): the answer for %s is larger than %d bytes even for a window of %v",
				a.path, w.service, w.since.Format(time.RFC3339Nano), r.cfg.MaxAnswerBytes, r.cfg.MinWindow)
		}
		if full {
			r.res.Crowded++
		}
		r.accept(a.td)
	}
	return nil
}

// accept adds the traces of td not read before, whole, while they fit
// under MaxSpans, and converts them.
func (r *reader) accept(td ptrace.Traces) {
	counts := make(map[pcommon.TraceID]int)
	var order []pcommon.TraceID
	translate.EachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		id := sp.TraceID()
		if _, dup := r.seen[id]; dup {
			return
		}
		if counts[id] == 0 {
			order = append(order, id)
		}
		counts[id]++
	})
	keep := make(map[pcommon.TraceID]struct{}, len(order))
	for _, id := range order {
		if r.spans+counts[id] > r.cfg.MaxSpans {
			r.res.Truncated = true
			break
		}
		r.spans += counts[id]
		keep[id] = struct{}{}
		r.seen[id] = struct{}{}
	}
	if len(keep) == 0 {
		return
	}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				_, ok := keep[sp.TraceID()]
				return !ok
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	r.res.Traces += len(keep)
	cr := r.conv.Convert(td)
	r.res.Spans = append(r.res.Spans, cr.Spans...)
	r.res.Stats.Add(cr.Stats)
}

// answer is one FindTraces answer.
type answer struct {
	path     string        // the request's path, for messages
	td       ptrace.Traces // every span of the answer
	traces   int           // distinct trace ids in td
	tooLarge bool          // the body passed MaxAnswerBytes and was not read
}

// find runs FindTraces for w. Raw traces are asked for: without
// query.raw_traces the query service runs its adjusters over them (clock
// skew correction, span de-duplication, sorting), and budgetd judges clock
// skew itself.
func (r *reader) find(ctx context.Context, w window) (answer, error) {
	q := url.Values{}
	q.Set("query.service_name", w.service)
	q.Set("query.start_time_min", w.since.UTC().Format(time.RFC3339Nano))
	q.Set("query.start_time_max", w.until.UTC().Format(time.RFC3339Nano))
	q.Set("query.num_traces", strconv.Itoa(r.cfg.NumTraces))
	q.Set("query.raw_traces", "true")
	what := fmt.Sprintf("(service %q)", w.service)
	body, path, err := r.get(ctx, "api/v3/traces", q, what, true)
	a := answer{path: path, td: ptrace.NewTraces()}
	if errors.Is(err, errTooLarge) {
		a.tooLarge = true
		return a, nil
	}
	if err != nil {
		return answer{}, err
	}
	// The body is one {"result":TracesData} object, or several when a
	// grpc-gateway streams the chunks of FindTraces one after the other.
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var chunk gatewayChunk
		if err := dec.Decode(&chunk); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return answer{}, fmt.Errorf("GET %s %s: decode api_v3 answer: %w", path, what, err)
		}
		if chunk.Error != nil {
			if chunk.Error.notFound() {
				continue // a streamed "no traces found"
			}
			return answer{}, fmt.Errorf("GET %s %s: %s", path, what, chunk.Error.text())
		}
		if len(chunk.Result) == 0 || bytes.Equal(chunk.Result, []byte("null")) {
			continue
		}
		tds, err := ingest.DecodeTraces(chunk.Result)
		if err != nil {
			return answer{}, fmt.Errorf("GET %s %s: %w", path, what, err)
		}
		for _, td := range tds {
			td.ResourceSpans().MoveAndAppendTo(a.td.ResourceSpans())
		}
	}
	ids := make(map[pcommon.TraceID]struct{})
	translate.EachSpan(a.td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) { ids[sp.TraceID()] = struct{}{} })
	a.traces = len(ids)
	return a, nil
}

// services lists the services Jaeger knows.
func (r *reader) services(ctx context.Context) ([]string, error) {
	body, path, err := r.get(ctx, "api/v3/services", nil, "", false)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("GET %s: the answer is larger than %d bytes", path, r.cfg.MaxAnswerBytes)
	}
	if err != nil {
		return nil, err
	}
	var answer struct {
		Services []string `json:"services"` // absent when there are none
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("GET %s: decode api_v3 answer: %w", path, err)
	}
	return answer.Services, nil
}

// errTooLarge is get's answer to a body over MaxAnswerBytes.
var errTooLarge = errors.New("answer too large")

// get sends GET base/route?q and returns the answer's body and the path
// asked for (for messages; what says more about the request). A body over
// MaxAnswerBytes is errTooLarge. An answer other than 2xx is an error
// carrying Jaeger's message, except that notFoundIsEmpty makes api_v3's
// "No traces found" (404 with its JSON error body) an empty body.
func (r *reader) get(ctx context.Context, route string, q url.Values, what string, notFoundIsEmpty bool) ([]byte, string, error) {
	u := r.base.JoinPath(route)
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // a base URL without a path
	}
	u.RawQuery = q.Encode()
	path := u.Path
	where := "GET " + path
	if what != "" {
		where += " " + what
	}
	reqCtx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	}
	r.res.Requests++
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, path, r.transportError(ctx, reqCtx, where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(r.cfg.MaxAnswerBytes)+1))
	if err != nil {
		return nil, path, r.transportError(ctx, reqCtx, where, err)
	}
	if resp.StatusCode/100 == 2 {
		if len(body) > r.cfg.MaxAnswerBytes {
			return nil, path, errTooLarge
		}
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '{' {
			return nil, path, fmt.Errorf("%s: the answer is not api_v3 JSON (Content-Type %q, starting %q): is %s Jaeger's query service, with its base path?",
				where, resp.Header.Get("Content-Type"), snippet(t), r.base.Redacted())
		}
		return body, path, nil
	}
	var e struct {
		Error *gatewayError `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		e.Error = nil
	}
	if resp.StatusCode == http.StatusNotFound && notFoundIsEmpty && e.Error != nil {
		return nil, path, nil
	}
	msg := snippet(bytes.TrimSpace(body))
	if e.Error != nil {
		msg = e.Error.text()
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		switch {
		case r.cfg.Token != "":
			msg += " (the bearer token was refused)"
		case r.base.User != nil:
			msg += " (the URL's user and password were refused)"
		default:
			msg += " (no credentials were sent)"
		}
	case resp.StatusCode == http.StatusNotFound && e.Error == nil:
		msg += fmt.Sprintf(" (is %s Jaeger's query service, with its base path, and does it serve api_v3?)", r.base.Redacted())
	}
	return nil, path, fmt.Errorf("%s: %s: %s", where, resp.Status, msg)
}

// transportError describes a request that got no (whole) answer, telling
// the caller leaving (ctx) from the request's own timeout (reqCtx).
func (r *reader) transportError(ctx, reqCtx context.Context, where string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", where, ctx.Err())
	}
	if reqCtx.Err() != nil {
		return fmt.Errorf("%s: no answer within %v: %w", where, r.cfg.RequestTimeout, reqCtx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the whole URL, query and all
	}
	return fmt.Errorf("%s: %w", where, err)
}

// gatewayChunk is one object of an api_v3 answer over HTTP.
type gatewayChunk struct {
	Result json.RawMessage `json:"result"`
	Error  *gatewayError   `json:"error"`
}

// gatewayError is api_v3's GRPCGatewayError details, or a grpc-gateway
// status ({"code":…,"message":…}).
type gatewayError struct {
	HTTPCode int    `json:"httpCode"`
	GRPCCode int    `json:"grpcCode"`
	Code     int    `json:"code"`
	Message  string `json:"message"`
}

// notFound says the error is "no traces found": HTTP 404 or gRPC NotFound.
func (e *gatewayError) notFound() bool {
	const grpcNotFound = 5
	return e.HTTPCode == http.StatusNotFound || e.GRPCCode == grpcNotFound || (e.HTTPCode == 0 && e.Code == grpcNotFound)
}

func (e *gatewayError) text() string {
	if e.Message == "" {
		return "(no message)"
	}
	return e.Message
}

// snippet returns the start of b for a message.
func snippet(b []byte) string {
	const most = 200
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}
