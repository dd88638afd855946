package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"

	"github.com/budgetd/budgetd/durable"
)

// outcome is how an OTLP request ended. It is the closed set every answer
// comes from: each outcome has one HTTP status, one gRPC code and one
// metric label, defined in this file and nowhere else.
type outcome uint8

const (
	outcomeOK                  outcome = iota // every span stored
	outcomePartial                            // some spans rejected, the rest stored
	outcomeMalformed                          // the body does not decode
	outcomeTooLarge                           // over the size limit after decompression
	outcomeUnsupportedType                    // HTTP Content-Type not OTLP
	outcomeUnsupportedEncoding                // HTTP Content-Encoding not gzip/zstd
	outcomeOverloaded                         // queue or concurrency limit full
	outcomeUnavailable                        // store down or slow, or shutting down
	outcomeCanceled                           // the sender went away first
	outcomeNotFound                           // HTTP path not /v1/traces
	outcomeMethodNotAllowed                   // HTTP method not POST
	outcomeUnauthenticated                    // no accepted bearer token (ingest.auth)
)

// String is the `outcome` metric label.
func (o outcome) String() string {
	switch o {
	case outcomeOK:
		return "ok"
	case outcomePartial:
		return "partial"
	case outcomeMalformed:
		return "malformed"
	case outcomeTooLarge:
		return "too_large"
	case outcomeUnsupportedType:
		return "unsupported_media_type"
	case outcomeUnsupportedEncoding:
		return "unsupported_encoding"
	case outcomeOverloaded:
		return "overloaded"
	case outcomeUnavailable:
		return "unavailable"
	case outcomeCanceled:
		return "canceled"
	case outcomeNotFound:
		return "not_found"
	case outcomeMethodNotAllowed:
		return "method_not_allowed"
	case outcomeUnauthenticated:
		return "unauthenticated"
	}
	return "unknown"
}

// httpStatus is the OTLP/HTTP status of an outcome. 503 is the one status
// (with 429, 502 and 504) OTLP senders retry; everything else in 4xx tells
// them the data is bad and retrying will not help.
func (o outcome) httpStatus() int {
	switch o {
	case outcomeOK, outcomePartial:
		return http.StatusOK
	case outcomeMalformed, outcomeUnsupportedEncoding:
		return http.StatusBadRequest
	case outcomeTooLarge:
		return http.StatusRequestEntityTooLarge
	case outcomeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case outcomeNotFound:
		return http.StatusNotFound
	case outcomeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case outcomeUnauthenticated:
		return http.StatusUnauthorized
	default: // overloaded, unavailable, canceled
		return http.StatusServiceUnavailable
	}
}

// grpcCode is the OTLP/gRPC code of an outcome. UNAVAILABLE is retried by
// OTLP senders; RESOURCE_EXHAUSTED only with a RetryInfo, which a request
// over the size limit does not get.
func (o outcome) grpcCode() codes.Code {
	switch o {
	case outcomeOK, outcomePartial:
		return codes.OK
	case outcomeMalformed, outcomeUnsupportedType, outcomeUnsupportedEncoding:
		return codes.InvalidArgument
	case outcomeTooLarge:
		return codes.ResourceExhausted
	case outcomeCanceled:
		return codes.Canceled
	case outcomeNotFound, outcomeMethodNotAllowed:
		return codes.Unimplemented
	case outcomeUnauthenticated:
		return codes.Unauthenticated
	default: // overloaded, unavailable
		return codes.Unavailable
	}
}

// retryable reports whether the sender is told when to retry.
func (o outcome) retryable() bool {
	return o == outcomeOverloaded || o == outcomeUnavailable || o == outcomeCanceled
}

// requestError is a failed request: its outcome and what the sender is told.
type requestError struct {
	outcome outcome
	err     error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// fail returns a requestError with outcome o around err.
func fail(o outcome, err error) *requestError { return &requestError{outcome: o, err: err} }

// outcomeOf returns the outcome of a failed request: the requestError's
// own, or for errors from Commit the retryable outcome they stand for.
// Every store failure asks the sender to retry: the request itself was
// valid, and failures that are not "unreachable" (a merge backlog, a memory
// limit) pass too.
func outcomeOf(err error) outcome {
	var re *requestError
	switch {
	case errors.As(err, &re):
		return re.outcome
	case errors.Is(err, durable.ErrOverloaded):
		return outcomeOverloaded
	case errors.Is(err, context.Canceled):
		return outcomeCanceled
	default: // ErrClosed, store.ErrUnavailable, deadlines, other store errors
		return outcomeUnavailable
	}
}

// refusedReason is the spans_refused_total label for a failed commit.
func refusedReason(err error) string {
	switch {
	case errors.Is(err, durable.ErrOverloaded):
		return refusedOverloaded
	case errors.Is(err, durable.ErrClosed):
		return refusedShutdown
	case errors.Is(err, context.Canceled):
		return refusedCanceled
	default:
		return refusedUnavailable
	}
}

// admit refuses, before it is decoded, a request the Durability says it
// could not take (see Durability.Admits).
func (s *Server) admit(protoBytes int, transport string) error {
	if s.dur.Admits(protoBytes) {
		return nil
	}
	s.m.requestsShed.WithLabelValues(transport).Inc()
	s.warnOverloaded(transport)
	return fail(outcomeOverloaded, fmt.Errorf("%w: no room for a %d-byte request", durable.ErrOverloaded, protoBytes))
}

// warnOverloaded logs, at most once per throttle period, that requests are
// being refused.
func (s *Server) warnOverloaded(transport string) {
	if ok, suppressed := s.throttle.Allow("overloaded", time.Now()); ok {
		s.log.Warn("ingest queue full, refusing requests until the store catches up",
			"transport", transport, "suppressed_lines", suppressed)
	}
}

// convertProto converts an OTLP/protobuf request for s. When s's
// Durability copies on Commit, the result borrows msg and reused buffers
// until release is called (ConvertProtoReusing); otherwise it is a copy and
// release does nothing. Either way release is called once the result is no
// longer used, and msg is not changed before then.
func (s *Server) convertProto(msg []byte) (ConvertResult, func(), error) {
	if s.reuseRequests {
		return s.conv.ConvertProtoReusing(msg)
	}
	res, err := s.conv.ConvertProto(msg)
	return res, noRelease, err
}

// noRelease is the release of a result that borrows nothing.
func noRelease() {}

// export is the one export path both transports share once they have
// decoded and converted a request: make the valid spans durable (the write
// path hands them to the analysis), and build the response, with
// partial_success when spans were rejected. It returns an error only when
// nothing was stored and the sender should retry.
func (s *Server) export(ctx context.Context, res ConvertResult, transport string) (ptraceotlp.ExportResponse, outcome, error) {
	s.m.converted(transport, res.Received, res.Stats)

	if len(res.Spans) > 0 {
		if err := s.dur.Commit(ctx, res.Spans); err != nil {
			reason := refusedReason(err)
			s.m.spansRefused.WithLabelValues(reason).Add(float64(len(res.Spans)))
			if reason == refusedOverloaded {
				s.warnOverloaded(transport)
			}
			return ptraceotlp.ExportResponse{}, outcomeOf(err), fmt.Errorf("commit %d spans: %w", len(res.Spans), err)
		}
		s.m.spansAccepted.WithLabelValues(transport).Add(float64(len(res.Spans)))
	}

	resp := ptraceotlp.NewExportResponse()
	if res.Rejected == 0 {
		return resp, outcomeOK, nil
	}
	ps := resp.PartialSuccess()
	ps.SetRejectedSpans(int64(res.Rejected))
	ps.SetErrorMessage(res.RejectReason)
	if ok, suppressed := s.throttle.Allow("rejected", time.Now()); ok {
		s.log.Warn("rejected invalid spans", "transport", transport, "rejected", res.Rejected,
			"reason", res.RejectReason, "suppressed_lines", suppressed)
	}
	return resp, outcomePartial, nil
}
