package budget

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Transport is an http.RoundTripper that spends the request's budget. For
// each request it computes what is left: the request context's deadline
// minus now minus ResponseMargin. With nothing left it refuses to send and
// returns an error matching ErrBudgetExhausted. Otherwise it bounds the
// request (including reading the response body) by that figure, or by
// Timeout when that is shorter, and sends the bound downstream in the
// x-request-timeout-ms header, replacing any value the request carried.
//
// It records budget.timeout_ms (the bound this request was given: the
// smaller of Timeout and the budget left, not Timeout alone),
// budget.propagated_ms (the header value), budget.attempt and, under Retry,
// budget.max_attempts and budget.backoff_ms on the span of the request
// context. Wrap it in otelhttp.NewTransport, not the other way round, so that
// span is the CLIENT span otelhttp starts for this request:
//
//	client := &http.Client{Transport: otelhttp.NewTransport(&budget.Transport{
//		Base:           http.DefaultTransport,
//		ResponseMargin: 20 * time.Millisecond,
//	})}
//
// A request whose context has no deadline and a Transport without Timeout
// pass through unbounded, without the header: there is no budget to send.
// The zero Transport is usable; it is safe for concurrent use.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// ResponseMargin is kept back from the remaining budget for this hop's
	// own work after the call returns: reading the response, answering its
	// caller, the network back. The callee is told the budget without it,
	// so it gives up first and this hop still has time to answer. A few
	// milliseconds to tens of milliseconds, depending on the hop; negative
	// counts as zero.
	ResponseMargin time.Duration
	// Timeout, when > 0, is the longest any single request may take, even
	// with more budget left (a per-attempt timeout from the dependency's
	// measured latency). The budget still wins when it is shorter.
	Timeout time.Duration
	// SendGRPCTimeout also sends the bound as a grpc-timeout header, for
	// callees (gRPC-Web, Envoy, gRPC gateways) that read that one.
	SendGRPCTimeout bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	span := trace.SpanFromContext(req.Context())
	attrs := attemptFrom(req.Context()).attrs()

	limit, bounded, err := callLimit(req.Context(), time.Now(), t.ResponseMargin, t.Timeout)
	if err != nil {
		span.SetAttributes(attrs...)
		// A RoundTripper must close the request body, even on error.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if !bounded {
		span.SetAttributes(attrs...)
		return base.RoundTrip(req)
	}

	ctx, cancel := context.WithTimeout(req.Context(), limit)
	// A RoundTripper must not modify the caller's request.
	out := req.Clone(ctx)
	// The header is whole milliseconds rounded down, so the callee never gets
	// more than this hop waits for. grpc-timeout carries the same figure,
	// exactly up to 99,999,999 ms (about 27 hours); a longer one that no unit
	// writes exactly in 8 digits is rounded up to its unit, as grpc-go rounds.
	sent := limit.Truncate(time.Millisecond)
	out.Header.Set(HeaderTimeoutMs, strconv.FormatInt(sent.Milliseconds(), 10))
	if t.SendGRPCTimeout {
		out.Header.Set(HeaderGRPCTimeout, formatGRPCTimeout(sent))
	}
	span.SetAttributes(append(attrs,
		attribute.Float64(AttrTimeoutMs, ms(limit)),
		attribute.Float64(AttrPropagatedMs, ms(sent)),
	)...)

	resp, err := base.RoundTrip(out)
	if err != nil {
		cancel()
		return nil, err
	}
	// The bound covers reading the body; closing it releases the timer.
	resp.Body = newCancelBody(resp.Body, cancel)
	return resp, nil
}

// newCancelBody wraps body so that closing it calls cancel. A 101 Switching
// Protocols response has a writable body, which callers use through an
// io.ReadWriteCloser assertion; the wrapper keeps that working.
func newCancelBody(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if body == nil {
		cancel()
		return nil
	}
	cb := cancelBody{ReadCloser: body, cancel: cancel}
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return cancelReadWriteBody{cancelBody: cb, w: rw}
	}
	return cb
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}

type cancelReadWriteBody struct {
	cancelBody
	w io.Writer
}

func (b cancelReadWriteBody) Write(p []byte) (int, error) { return b.w.Write(p) }
