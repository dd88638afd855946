package budgetread

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// budgetKey numbers the attributes Read looks at, so one pass over a
// span's attributes can note where each one is without building a map.
type budgetKey uint8

const (
	keyRemaining budgetKey = iota
	keySource
	keyTimeout
	keyPropagated
	keyAttempt
	keyMaxAttempts
	keyBackoff
	keyRejected
	// Budget fallbacks, in priority order.
	keyHeaderTimeoutMs
	keyHeaderGRPCTimeout
	keyMetadataGRPCTimeout
	keyHeaderEnvoyExpected
	keyHeaderDeadline
	// Attempt fallbacks, in priority order.
	keyResendCount
	keyPreviousAttempts
	keyEnvoyAttempt
	// Timeout evidence.
	keyErrorType
	keyHTTPStatus
	keyGRPCStatus
	keyRPCStatus
	keyHTTPStatusOld
	// Context for the timeout evidence: which RPC system numbered a code.
	keyRPCSystemName
	keyRPCSystem
	numBudgetKeys
)

// budgetKeyNames is the attribute name of each budgetKey, the inverse of
// budgetKeyOf (TestBudgetKeyNames keeps the two in step).
var budgetKeyNames = [numBudgetKeys]string{
	keyRemaining: schema.AttrRemainingMs, keySource: schema.AttrSource, keyTimeout: schema.AttrTimeoutMs,
	keyPropagated: schema.AttrPropagatedMs, keyAttempt: schema.AttrAttempt, keyMaxAttempts: schema.AttrMaxAttempts,
	keyBackoff: schema.AttrBackoffMs, keyRejected: schema.AttrRejected,
	keyHeaderTimeoutMs: schema.AttrHeaderRequestTimeoutMs, keyHeaderGRPCTimeout: schema.AttrHeaderGRPCTimeout,
	keyMetadataGRPCTimeout: schema.AttrMetadataGRPCTimeout, keyHeaderEnvoyExpected: schema.AttrHeaderEnvoyExpectedMs,
	keyHeaderDeadline: schema.AttrHeaderRequestDeadline,
	keyResendCount:    schema.AttrHTTPResendCount, keyPreviousAttempts: schema.AttrGRPCPreviousAttempts, keyEnvoyAttempt: schema.AttrHeaderEnvoyAttempt,
	keyErrorType: schema.AttrErrorType, keyHTTPStatus: schema.AttrHTTPStatusCode, keyGRPCStatus: schema.AttrRPCGRPCStatusCode,
	keyRPCStatus: schema.AttrRPCResponseStatusCode, keyHTTPStatusOld: schema.AttrHTTPStatusCodeOld,
	keyRPCSystemName: schema.AttrRPCSystemName, keyRPCSystem: schema.AttrRPCSystem,
}

// AttrIndex returns key's place in AttrNames when key is a budget
// attribute (IsAttr), so code that holds many spans can keep a byte for
// the name.
func AttrIndex(key string) (int, bool) {
	k, ok := budgetKeyOf(key)
	return int(k), ok
}

// AttrNames returns the budget attributes' names in AttrIndex's order.
func AttrNames() []string { return slices.Clone(budgetKeyNames[:]) }

func budgetKeyOf(key string) (budgetKey, bool) {
	switch key {
	case schema.AttrRemainingMs:
		return keyRemaining, true
	case schema.AttrSource:
		return keySource, true
	case schema.AttrTimeoutMs:
		return keyTimeout, true
	case schema.AttrPropagatedMs:
		return keyPropagated, true
	case schema.AttrAttempt:
		return keyAttempt, true
	case schema.AttrMaxAttempts:
		return keyMaxAttempts, true
	case schema.AttrBackoffMs:
		return keyBackoff, true
	case schema.AttrRejected:
		return keyRejected, true
	case schema.AttrHeaderRequestTimeoutMs:
		return keyHeaderTimeoutMs, true
	case schema.AttrHeaderGRPCTimeout:
		return keyHeaderGRPCTimeout, true
	case schema.AttrMetadataGRPCTimeout:
		return keyMetadataGRPCTimeout, true
	case schema.AttrHeaderEnvoyExpectedMs:
		return keyHeaderEnvoyExpected, true
	case schema.AttrHeaderRequestDeadline:
		return keyHeaderDeadline, true
	case schema.AttrHTTPResendCount:
		return keyResendCount, true
	case schema.AttrGRPCPreviousAttempts:
		return keyPreviousAttempts, true
	case schema.AttrHeaderEnvoyAttempt:
		return keyEnvoyAttempt, true
	case schema.AttrErrorType:
		return keyErrorType, true
	case schema.AttrHTTPStatusCode:
		return keyHTTPStatus, true
	case schema.AttrRPCGRPCStatusCode:
		return keyGRPCStatus, true
	case schema.AttrRPCResponseStatusCode:
		return keyRPCStatus, true
	case schema.AttrHTTPStatusCodeOld:
		return keyHTTPStatusOld, true
	case schema.AttrRPCSystemName:
		return keyRPCSystemName, true
	case schema.AttrRPCSystem:
		return keyRPCSystem, true
	}
	return 0, false
}

// budgetReader holds the state of one Read call.
type budgetReader struct {
	span *schema.Span
	f    Facts
	at   [numBudgetKeys]int32 // index+1 of each attribute in span.Attrs, 0 when absent
	// slab backs the float pointers of f, so a span costs one allocation
	// for all of them rather than one each.
	slab *[4]float64
	used int
}

// Read returns the budget facts of s: the budget.* attributes and
// budget.cancelled events of the contract in DESIGN §4 and
// docs/attributes.md, with the budget and the attempt number inferred from
// request headers and metadata where the span does not record them.
//
// It never fails. A value that cannot be used (wrong type, malformed,
// negative where that makes no sense, not finite, beyond MaxMs, empty, or a
// repeated key) is ignored and listed in Facts.Invalid, so callers can
// count it. Every contract attribute present on the span is checked, even a
// fallback that a recorded value makes unnecessary, so that a broken header
// shows up before it is needed. Invalid is in a fixed order (repeated keys,
// then budget.*, budget fallbacks, attempt fallbacks, status attributes and
// events), not in attribute order.
//
// Budget fallbacks, in priority order: x-request-timeout-ms, grpc-timeout
// (HTTP header, then gRPC metadata), x-envoy-expected-rq-timeout-ms,
// x-request-deadline (epoch ms, made relative to the span start). On an
// entry (or internal) span the first usable one becomes RemainingMs when
// budget.remaining_ms is absent or unusable. On a CLIENT or PRODUCER span the
// request headers are what the call sent downstream, so they fill
// PropagatedMs instead; RemainingMs is never guessed for a call. Either way
// Inferred is set. Source is never guessed: it stays empty unless
// budget.source says otherwise. A header attribute may hold several values
// (one per header line); the first usable one counts, and the attribute is
// listed in Invalid, once, only when none is usable.
//
// Attempt fallbacks, when budget.attempt is absent or unusable:
// http.request.resend_count + 1, grpc-previous-rpc-attempts + 1, then
// x-envoy-attempt-count (already 1-based).
func Read(s *schema.Span) Facts {
	if s == nil {
		return Facts{}
	}
	r := budgetReader{span: s}
	for i := range s.Attrs {
		k, ok := budgetKeyOf(s.Attrs[i].Key)
		if !ok {
			continue
		}
		if r.at[k] != 0 {
			// OTLP forbids repeated keys; the first one wins, as in
			// Attributes.Get.
			r.invalid(s.Attrs[i].Key, reasonDuplicate)
			continue
		}
		r.at[k] = int32(i + 1)
	}

	r.readRecorded()
	r.inferBudget()
	r.inferAttempt()
	r.readTimedOut()
	r.readCancellations()
	return r.f
}

func (r *budgetReader) attr(k budgetKey) (schema.Attr, bool) {
	if i := r.at[k]; i != 0 {
		return r.span.Attrs[i-1], true
	}
	return schema.Attr{}, false
}

// text returns attribute k's value when it is a non-empty string; any
// other value of k is recorded as invalid.
func (r *budgetReader) text(k budgetKey) (string, bool) {
	a, ok := r.attr(k)
	switch {
	case !ok:
		return "", false
	case a.Type != schema.AttrString:
		r.invalid(a.Key, reasonWrongType)
		return "", false
	case a.Value == "":
		r.invalid(a.Key, reasonEmpty)
		return "", false
	}
	return a.Value, true
}

func (r *budgetReader) invalid(key, reason string) {
	r.f.Invalid = append(r.f.Invalid, InvalidValue{Key: key, Reason: reason})
}

func (r *budgetReader) ptr(v float64) *float64 {
	if r.slab == nil {
		r.slab = new([4]float64)
	}
	p := &r.slab[r.used]
	r.used++
	*p = v
	return p
}

// ms reads a millisecond attribute; negative values are refused unless
// signed.
func (r *budgetReader) ms(k budgetKey, signed bool) *float64 {
	a, ok := r.attr(k)
	if !ok {
		return nil
	}
	v, reason := attrNumber(a)
	if reason == "" && v < 0 && !signed {
		reason = reasonNegative
	}
	if reason != "" {
		r.invalid(a.Key, reason)
		return nil
	}
	return r.ptr(v)
}

func (r *budgetReader) count(k budgetKey) uint32 {
	a, ok := r.attr(k)
	if !ok {
		return 0
	}
	n, reason := attrCount(a, 1)
	if reason != "" {
		r.invalid(a.Key, reason)
		return 0
	}
	return n
}

// readRecorded reads the budget.* attributes. A remaining budget may be
// negative (the request arrived expired) and so may a propagated one (the
// caller sent an already expired budget downstream, which is worth seeing);
// a timeout, a backoff and attempt numbers may not.
func (r *budgetReader) readRecorded() {
	r.f.RemainingMs = r.ms(keyRemaining, true)
	r.f.TimeoutMs = r.ms(keyTimeout, false)
	r.f.PropagatedMs = r.ms(keyPropagated, true)
	r.f.BackoffMs = r.ms(keyBackoff, false)
	r.f.Attempt = r.count(keyAttempt)
	r.f.MaxAttempts = r.count(keyMaxAttempts)

	if a, ok := r.attr(keySource); ok {
		switch src := schema.BudgetSource(a.Value); {
		case a.Type == schema.AttrEmpty:
			r.invalid(a.Key, reasonEmpty)
		case a.Type != schema.AttrString:
			r.invalid(a.Key, reasonWrongType)
		case src == schema.SourcePropagated || src == schema.SourceEdge || src == schema.SourceDefault || src == schema.SourceNone:
			r.f.Source = src
		case src == "":
			r.invalid(a.Key, reasonEmpty)
		default:
			r.invalid(a.Key, reasonUnknownValue)
		}
	}

	if a, ok := r.attr(keyRejected); ok {
		switch {
		case a.Type == schema.AttrEmpty:
			r.invalid(a.Key, reasonEmpty)
		case a.Type != schema.AttrBool && a.Type != schema.AttrString:
			r.invalid(a.Key, reasonWrongType)
		case strings.EqualFold(a.Value, "true"):
			r.f.Rejected = true
		case strings.EqualFold(a.Value, "false"):
		case a.Value == "":
			r.invalid(a.Key, reasonEmpty)
		default:
			r.invalid(a.Key, reasonUnknownValue)
		}
	}
}

// inferBudget reads the budget fallbacks. All of them are checked; the first
// usable one in priority order fills the budget if the span recorded none.
func (r *budgetReader) inferBudget() {
	var inferred float64
	found := false
	for k := keyHeaderTimeoutMs; k <= keyHeaderDeadline; k++ {
		a, ok := r.attr(k)
		if !ok {
			continue
		}
		v, ok := r.headerBudget(k, a)
		if ok && !found {
			inferred, found = v, true
		}
	}
	if !found {
		return
	}
	target := &r.f.RemainingMs
	if r.span.Kind.IsCall() {
		target = &r.f.PropagatedMs
	}
	if *target == nil {
		*target = r.ptr(inferred)
		r.f.Inferred = true
	}
}

// headerBudget returns the budget in ms carried by the first usable value of
// the fallback header a, or records why none was usable (the reason of the
// first bad value).
func (r *budgetReader) headerBudget(k budgetKey, a schema.Attr) (float64, bool) {
	return firstUsable(r, a, func(h string) (float64, string) {
		switch k {
		case keyHeaderGRPCTimeout, keyMetadataGRPCTimeout:
			d, why := parseGRPCTimeout(h)
			return float64(d) / float64(time.Millisecond), why
		case keyHeaderDeadline:
			return r.deadline(h)
		default:
			return parseDecimal(h, false, false)
		}
	})
}

// firstUsable returns the first value of the header attribute a that parse
// accepts (parse returns a reason for a value it refuses). When none is
// usable it records the reason of the first refusal, or of the attribute's
// shape, and reports false.
func firstUsable[T any](r *budgetReader, a schema.Attr, parse func(string) (T, string)) (T, bool) {
	var zero T
	it, reason := newHeaderValues(a)
	if reason != "" {
		r.invalid(a.Key, reason)
		return zero, false
	}
	for {
		h, ok, end := it.next()
		if !ok {
			if reason == "" {
				reason = end
			}
			break
		}
		v, why := parse(h)
		if why == "" {
			return v, true
		}
		if reason == "" {
			reason = why
		}
	}
	r.invalid(a.Key, reason)
	return zero, false
}

// deadline turns an x-request-deadline value (absolute Unix epoch ms) into
// the budget left at the span's start. The whole milliseconds are subtracted
// as integers, both exact in a float64, before the sub-millisecond part of
// the start, so a deadline 250 ms after the start reads as exactly 250.
func (r *budgetReader) deadline(h string) (float64, string) {
	d, reason := parseDecimal(h, false, false)
	if reason != "" {
		return 0, reason
	}
	if r.span.StartNs == 0 {
		return 0, reasonNoStart
	}
	startMs := r.span.StartNs / 1e6 // below 2^45 for any uint64, so exact
	frac := r.span.StartNs % 1e6
	return checkMs((d - float64(startMs)) - float64(frac)/1e6)
}

// inferAttempt reads the attempt fallbacks: http.request.resend_count and
// grpc-previous-rpc-attempts count earlier attempts (so this one is that
// plus one), x-envoy-attempt-count is already 1-based.
func (r *budgetReader) inferAttempt() {
	var attempt uint32
	if a, ok := r.attr(keyResendCount); ok {
		n, reason := attrCount(a, 0)
		if reason == "" && n == math.MaxUint32 {
			reason = reasonOutOfRange
		}
		if reason != "" {
			r.invalid(a.Key, reason)
		} else {
			attempt = n + 1
		}
	}
	for _, k := range [...]budgetKey{keyPreviousAttempts, keyEnvoyAttempt} {
		a, ok := r.attr(k)
		if !ok {
			continue
		}
		if n, ok := r.headerCount(k, a); ok && attempt == 0 {
			attempt = n
		}
	}
	if r.f.Attempt == 0 {
		r.f.Attempt = attempt
	}
}

// headerCount returns the 1-based attempt number carried by the first usable
// value of the attempt header a, or records why none was usable.
func (r *budgetReader) headerCount(k budgetKey, a schema.Attr) (uint32, bool) {
	return firstUsable(r, a, func(h string) (uint32, string) {
		n, why := parseCount(h)
		switch {
		case why != "":
			return 0, why
		case k == keyPreviousAttempts && n == math.MaxUint32:
			return 0, reasonOutOfRange
		case k == keyPreviousAttempts:
			return n + 1, ""
		case n == 0:
			return 0, reasonZero
		}
		return n, ""
	})
}

// verdict is what one piece of status evidence says about how a call ended.
// Verdicts are ordered: when the pieces of evidence on a span disagree, the
// highest wins.
type verdict uint8

const (
	verdictNone verdict = iota
	// verdictTimeout: a timer or a deadline ran out.
	verdictTimeout
	// verdictCancelled: someone above gave up. It beats a bare timeout
	// because a cancelled call must never feed an inferred timeout
	// (analyze.infer): when the evidence disagrees, the cautious reading
	// wins.
	verdictCancelled
	// verdictTimerCancel: a cancellation that the same evidence explains by
	// a timeout, as .NET's "The request was canceled due to the configured
	// HttpClient.Timeout" and Go's "request canceled (Client.Timeout
	// exceeded …)" do. It is a timeout, and it beats a bare cancellation
	// elsewhere on the span (error.type TaskCanceledException, recorded for
	// the same exception) because it says more.
	verdictTimerCancel
)

// readTimedOut decides whether the span's outcome was a timeout or a
// cancellation, and which of the two, from the evidence of
// docs/attributes.md §3: error.type, the gRPC status (rpc.grpc.status_code,
// or its newer string form rpc.response.status_code), the HTTP status
// (http.response.status_code, else the older http.status_code) and, on a
// failed span that carries no RPC status, the status description and the
// exception events. Each piece gives a verdict and the highest verdict
// wins.
//
// An RPC status, when the span has one, is the whole outcome of the call:
// the status description is only its message, and it often quotes an error
// from further down ("code = Unknown desc = query: context deadline
// exceeded" is a callee that answered, not a call that timed out), so then
// neither the description nor the exception events are read. An HTTP status
// does not silence them: a client can get its response headers and then time
// out reading the body.
func (r *budgetReader) readTimedOut() {
	v := verdictNone
	if name, ok := r.text(keyErrorType); ok {
		v = nameVerdict(name)
	}
	rpc := false // the span carries a usable RPC status
	if a, ok := r.attr(keyGRPCStatus); ok {
		if code, ok := r.statusCode(a); ok {
			rpc = true
			v = max(v, grpcCodeVerdict(code))
		}
	}
	if code, ok := r.text(keyRPCStatus); ok {
		rpc = true
		v = max(v, r.rpcStatusVerdict(code))
	}
	v = max(v, r.httpVerdict())
	if r.span.StatusCode == schema.StatusError && !rpc {
		v = max(v, freeTextVerdict(r.span))
	}
	r.f.TimedOut = v != verdictNone
	r.f.Cancelled = v == verdictCancelled
}

// nameVerdict reads an error or exception name (error.type,
// exception.type). Semantic conventions ask for error.type "timeout", but
// instrumentations commonly put an exception or error name there instead
// (context.DeadlineExceeded, SocketTimeoutException, ETIMEDOUT,
// DEADLINE_EXCEEDED), so any name containing "timeout", "timedout",
// "timed out" or "deadline", in any case, is a timeout, and one containing
// "cancel" (context.Canceled, CancellationException, TaskCanceledException)
// a cancellation.
func nameVerdict(name string) verdict {
	switch {
	case containsFold(name, "timeout") || containsFold(name, "timedout") ||
		containsFold(name, "timed out") || containsFold(name, "deadline"):
		return verdictTimeout
	case containsFold(name, "cancel"):
		return verdictCancelled
	}
	return verdictNone
}

// grpcCodeVerdict reads a numeric gRPC status code: 4 is DEADLINE_EXCEEDED,
// 1 is CANCELLED.
func grpcCodeVerdict(code uint32) verdict {
	switch code {
	case 4:
		return verdictTimeout
	case 1:
		return verdictCancelled
	}
	return verdictNone
}

// rpcStatusVerdict reads rpc.response.status_code: a gRPC code name in any
// case (Connect spells them in lower case and American English,
// "canceled"), or a gRPC code number in digits when the span says its RPC
// system is gRPC. Other systems number their codes differently (JSON-RPC,
// Dubbo), so a bare number is not read without that.
func (r *budgetReader) rpcStatusVerdict(s string) verdict {
	switch {
	case strings.EqualFold(s, "DEADLINE_EXCEEDED"):
		return verdictTimeout
	case strings.EqualFold(s, "CANCELLED") || strings.EqualFold(s, "CANCELED"):
		return verdictCancelled
	case !allDigits(s) || !r.isGRPC():
		return verdictNone
	}
	code, reason := parseCount(s)
	if reason != "" {
		return verdictNone // too large for a code: no code of gRPC's
	}
	return grpcCodeVerdict(code)
}

// isGRPC reports whether the span names gRPC as its RPC system, in
// rpc.system.name or, failing that, the older rpc.system.
func (r *budgetReader) isGRPC() bool {
	a, ok := r.attr(keyRPCSystemName)
	if !ok {
		a, ok = r.attr(keyRPCSystem)
	}
	return ok && a.Type == schema.AttrString && strings.EqualFold(a.Value, "grpc")
}

func allDigits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// httpVerdict reads the HTTP status: http.response.status_code, or the older
// http.status_code when the newer is absent or unusable (both are checked).
// 504 Gateway Timeout and 408 Request Timeout are timeouts, 499 Client
// Closed Request (nginx, Envoy) a cancellation.
func (r *budgetReader) httpVerdict() verdict {
	code, ok := r.httpCode(keyHTTPStatus)
	if old, oldOK := r.httpCode(keyHTTPStatusOld); !ok {
		code, ok = old, oldOK
	}
	switch {
	case !ok:
		return verdictNone
	case code == 504 || code == 408:
		return verdictTimeout
	case code == 499:
		return verdictCancelled
	}
	return verdictNone
}

func (r *budgetReader) httpCode(k budgetKey) (uint32, bool) {
	a, ok := r.attr(k)
	if !ok {
		return 0, false
	}
	return r.statusCode(a)
}

// maxEvidenceText bounds how much of a status description or exception
// message is read: real ones say what happened in their first few words,
// and a span with megabytes of text must not cost megabytes of scanning per
// pattern. It is larger than a URL quoted before the error usually is.
const maxEvidenceText = 4096

// freeTextVerdict reads the free-text evidence of a failed span: its status
// description and its exception events, the highest verdict winning.
func freeTextVerdict(s *schema.Span) verdict {
	v := textVerdict(s.StatusMessage)
	for i := range s.Events {
		if s.Events[i].Name == schema.EventException {
			v = max(v, exceptionVerdict(s.Events[i].Attrs))
		}
	}
	return v
}

// exceptionVerdict reads one exception event. Its exception.type decides
// (nameVerdict), with two refinements: a cancellation type whose
// exception.message names a timeout is a timeout (.NET's HttpClient throws
// TaskCanceledException at its own timeout), and a Go error type (a pointer
// type such as *url.Error or *errors.errorString, which the Go SDK records)
// or a missing type says nothing, so the message decides. The message of any
// other type (ValueError: "timeout must be positive") is not read.
func exceptionVerdict(as schema.Attributes) verdict {
	typ, hasType := stringAttr(as, schema.AttrExceptionType)
	switch v := nameVerdict(typ); {
	case v == verdictTimeout:
		return v
	case v == verdictCancelled:
		msg, _ := stringAttr(as, schema.AttrExceptionMessage)
		if m := textVerdict(msg); m == verdictTimeout || m == verdictTimerCancel {
			return verdictTimerCancel
		}
		return v
	case !hasType || typ == "" || typ[0] == '*':
		msg, _ := stringAttr(as, schema.AttrExceptionMessage)
		return textVerdict(msg)
	}
	return verdictNone
}

func stringAttr(as schema.Attributes, key string) (string, bool) {
	a, ok := as.Get(key)
	if !ok || a.Type != schema.AttrString {
		return "", false
	}
	return a.Value, true
}

// textVerdict reads a status description or an exception message, up to
// maxEvidenceText bytes:
//
//   - grpc-go's status form "rpc error: code = <Code> desc = <message>": the
//     code decides, DeadlineExceeded a timeout, Canceled a cancellation, any
//     other code neither, whatever the message quotes. The code is what the
//     party that ended the call decided; the message may be an error from
//     further down ("code = Canceled desc = context deadline exceeded" is a
//     cancellation).
//   - Otherwise, words outside double quotes (Go's url.Error quotes the URL,
//     which may say anything): "timeout", "timed out", "timedout" or
//     "deadline exceeded" (also "deadline_exceeded", "DeadlineExceeded") name
//     a timeout, "cancel" (canceled, cancelled, cancellation) a
//     cancellation, in any case. Text naming both is a cancellation
//     explained by a timeout ("request canceled (Client.Timeout exceeded
//     while awaiting headers)"): a timeout.
func textVerdict(s string) verdict {
	s = s[:min(len(s), maxEvidenceText)]
	if s == "" {
		return verdictNone
	}
	if v, ok := grpcStatusVerdict(s); ok {
		return v
	}
	timeout, cancel := false, false
	for rest := s; rest != ""; {
		part := rest
		rest = ""
		if i := strings.IndexByte(part, '"'); i >= 0 {
			if j := strings.IndexByte(part[i+1:], '"'); j >= 0 {
				part, rest = part[:i], part[i+1+j+1:]
			}
		}
		timeout = timeout || namesTimeout(part)
		cancel = cancel || containsFold(part, "cancel")
	}
	switch {
	case timeout && cancel:
		return verdictTimerCancel
	case timeout:
		return verdictTimeout
	case cancel:
		return verdictCancelled
	}
	return verdictNone
}

func namesTimeout(s string) bool {
	return containsFold(s, "timeout") || containsFold(s, "timed out") || containsFold(s, "timedout") ||
		containsFold(s, "deadline exceeded") || containsFold(s, "deadline_exceeded") ||
		containsFold(s, "deadlineexceeded")
}

// grpcStatusMarker starts the code in grpc-go's status error text,
// "rpc error: code = DeadlineExceeded desc = context deadline exceeded".
const grpcStatusMarker = "rpc error: code = "

// grpcStatusVerdict reads the code of a grpc-go status error text, and
// reports whether s holds one.
func grpcStatusVerdict(s string) (verdict, bool) {
	i := strings.Index(s, grpcStatusMarker)
	if i < 0 {
		return verdictNone, false
	}
	code := s[i+len(grpcStatusMarker):]
	if j := strings.IndexByte(code, ' '); j >= 0 {
		code = code[:j]
	}
	switch {
	case strings.EqualFold(code, "DeadlineExceeded"):
		return verdictTimeout, true
	case strings.EqualFold(code, "Canceled"):
		return verdictCancelled, true
	}
	return verdictNone, true
}

// StatusEvidence returns a short constant status description that
// Read reads as the same verdict (timeout, cancellation or neither) as
// the status description and exception events of s together, or "" when
// they say neither or s did not fail. Holders of many spans (trace assembly)
// keep it in place of both, so a held span costs no text for them.
func StatusEvidence(s *schema.Span) string {
	if s.StatusCode != schema.StatusError {
		return ""
	}
	return evidenceText(freeTextVerdict(s))
}

// evidenceText is the canonical status description of each verdict, for
// StatusEvidence: textVerdict(evidenceText(v)) == v.
func evidenceText(v verdict) string {
	switch v {
	case verdictTimeout:
		return "deadline exceeded"
	case verdictCancelled:
		return "canceled"
	case verdictTimerCancel:
		return "canceled by a timeout"
	}
	return ""
}

func (r *budgetReader) statusCode(a schema.Attr) (uint32, bool) {
	n, reason := attrCount(a, 0)
	if reason != "" {
		r.invalid(a.Key, reason)
		return 0, false
	}
	return n, true
}

// readCancellations collects the budget.cancelled events. An event with an
// unknown budget.cancel_source is kept (the cancellation happened) with the
// source left empty.
func (r *budgetReader) readCancellations() {
	for i := range r.span.Events {
		e := &r.span.Events[i]
		if e.Name != schema.EventCancelled {
			continue
		}
		c := Cancellation{TimeNs: e.TimeNs}
		if a, ok := e.Attrs.Get(schema.AttrCancelSource); ok {
			switch {
			case a.Type != schema.AttrString:
				r.invalid(a.Key, reasonWrongType)
			case a.Value == "caller_disconnect" || a.Value == "deadline" || a.Value == "upstream":
				c.Source = a.Value
			case a.Value == "":
				r.invalid(a.Key, reasonEmpty)
			default:
				r.invalid(a.Key, reasonUnknownValue)
			}
		}
		r.f.Cancellations = append(r.f.Cancellations, c)
	}
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring ASCII case, without allocating a lowered copy of s.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// IsAttr reports whether Read reads the attribute key: a budget.*
// attribute, one of its header fallbacks, a status that marks a timeout, or
// the RPC system that says how to read a status code.
// Holders of many spans (trace assembly) keep only these and drop the rest.
func IsAttr(key string) bool {
	_, ok := budgetKeyOf(key)
	return ok
}
