package ingest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/budgetd/budgetd/security"
)

// tracesPath is OTLP/HTTP's path for traces.
const tracesPath = "/v1/traces"

// The OTLP/HTTP content types.
const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
)

// bodyEncoding is the OTLP/HTTP body encoding a request chose with its
// Content-Type; the response uses the same.
type bodyEncoding uint8

const (
	encodingProtobuf bodyEncoding = iota + 1
	encodingJSON
)

func (e bodyEncoding) contentType() string {
	if e == encodingJSON {
		return contentTypeJSON
	}
	return contentTypeProtobuf
}

// parseContentType maps a Content-Type header (parameters such as charset
// allowed) to a body encoding.
func parseContentType(header string) (bodyEncoding, bool) {
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return 0, false
	}
	switch mt {
	case contentTypeProtobuf:
		return encodingProtobuf, true
	case contentTypeJSON:
		return encodingJSON, true
	}
	return 0, false
}

// pooledBufferMax is the largest request buffer kept for reuse. Larger
// requests are rare; keeping their buffers would pin up to
// max_request_bytes per pooled buffer.
const pooledBufferMax = 4 << 20

// bufferPool reuses the buffers request bodies are gathered into.
type bufferPool struct{ pool sync.Pool }

// get returns a buffer of n bytes, reused when a pooled one is large enough.
func (p *bufferPool) get(n int) []byte {
	if b, ok := p.pool.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (p *bufferPool) put(b []byte) {
	if cap(b) <= pooledBufferMax {
		p.pool.Put(&b)
	}
}

// chunks holds a body while it arrives: bodyChunk bytes at a time, each
// charged to the in-flight budget as it is read (budgetReader), so what a
// body holds is what it was charged. A growing bytes.Buffer doubled its
// slice and left the old ones behind for the collector: 16 gzipped bodies
// of 5.5 MB arriving at once held 152 MB for the 88 MB they were charged.
var chunks = sync.Pool{New: func() any { c := make([]byte, bodyChunk); return &c }}

// bodyChunk is the size of a body's chunks: what the budget reserves at a
// time.
const bodyChunk = budgetStep

// readBody reads src through br into one slice of the body's exact size,
// at most limit+1 bytes: the chunks are gathered into a buffer from
// s.buffers, charged to br before it is made, which the caller puts back.
// The error is src's, or errBudgetFull.
func (s *Server) readBody(src io.Reader, br *budgetReader, limit int64) ([]byte, error) {
	br.r = io.LimitReader(src, limit+1)
	var held [][]byte
	defer func() {
		for _, c := range held {
			chunks.Put(&c)
		}
	}()
	total := 0
	for {
		c := (*chunks.Get().(*[]byte))[:bodyChunk]
		n, err := fill(br, c)
		held = append(held, c[:n])
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if !br.reserveTotal(br.reserved + int64(total)) {
		return nil, errBudgetFull
	}
	body := s.buffers.get(total)
	at := 0
	for _, c := range held {
		at += copy(body[at:], c)
	}
	return body, nil
}

// fill reads into c until it is full or r fails. Unlike io.ReadFull it
// returns r's error as it is: a truncated compressed body's
// io.ErrUnexpectedEOF is an error, and only io.EOF ends a body.
func fill(r io.Reader, c []byte) (int, error) {
	n := 0
	for n < len(c) {
		m, err := r.Read(c[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// serveHTTP is the OTLP/HTTP handler.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	o := s.exportHTTP(w, r)
	s.m.requestDuration.WithLabelValues(transportHTTP, o.String()).Observe(time.Since(start).Seconds())
}

// exportHTTP answers one OTLP/HTTP request and returns its outcome.
func (s *Server) exportHTTP(w http.ResponseWriter, r *http.Request) outcome {
	if s.tokens != nil && !s.tokens.Check(r.Header.Get("Authorization")) {
		security.Challenge(w)
		writeText(w, outcomeUnauthenticated.httpStatus(), "401 unauthorized: "+security.ErrUnauthenticated.Error())
		return outcomeUnauthenticated
	}
	if r.URL.Path != tracesPath {
		writeText(w, http.StatusNotFound, "404 page not found: OTLP traces are sent with POST "+tracesPath)
		return outcomeNotFound
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeText(w, http.StatusMethodNotAllowed, "405 method not allowed, supported: [POST]")
		return outcomeMethodNotAllowed
	}
	enc, ok := parseContentType(r.Header.Get("Content-Type"))
	if !ok {
		writeText(w, http.StatusUnsupportedMediaType,
			"415 unsupported media type, supported: ["+contentTypeJSON+", "+contentTypeProtobuf+"]")
		return outcomeUnsupportedType
	}
	// The body is read before a request slot is taken: a sender trickling
	// its body holds the bytes it sent (of ingest.max_in_flight_bytes),
	// never a slot, and ingest.http.read_timeout cuts it off.
	in := &budgetReader{budget: s.inflight}
	defer func() { s.inflight.release(in.reserved) }()
	res, release, err := s.readHTTPRequest(w, r, enc, in)
	if err != nil {
		return s.writeHTTPError(w, enc, err)
	}
	defer release()
	if !in.reserveTotal(s.withRecord(in.reserved, res.Spans)) {
		return s.writeHTTPError(w, enc, fail(outcomeOverloaded, errBudgetFull))
	}
	if !s.acquire(s.httpSlots) {
		return s.writeHTTPError(w, enc, fail(outcomeOverloaded, errors.New("too many concurrent requests")))
	}
	defer s.release(s.httpSlots)
	resp, o, err := s.export(r.Context(), res, transportHTTP)
	if err != nil {
		return s.writeHTTPError(w, enc, fail(o, err))
	}
	var body []byte
	if enc == encodingJSON {
		body, err = resp.MarshalJSON()
	} else {
		body, err = resp.MarshalProto()
	}
	if err != nil {
		// Not reachable with pdata's marshalers. The spans are stored; a
		// resend stores them twice, which reads of the store tolerate.
		writeText(w, http.StatusInternalServerError, "encode response: "+err.Error())
		return o
	}
	w.Header().Set("Content-Type", enc.contentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return o
}

// readHTTPRequest reads, decompresses and decodes the body. The body is
// read through a limit of max_request_bytes+1 both on the wire and after
// decompression, so a small body that inflates to gigabytes costs at most
// the limit in memory before it is refused. The result may borrow the
// body's memory (convertProto): release gives it back once the result is
// no longer used.
func (s *Server) readHTTPRequest(w http.ResponseWriter, r *http.Request, enc bodyEncoding, body *budgetReader) (ConvertResult, func(), error) {
	limit := s.cfg.HTTP.MaxRequestBytes
	if r.ContentLength > limit {
		return ConvertResult{}, nil, fail(outcomeTooLarge,
			fmt.Errorf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit))
	}
	wire := &countingReader{r: http.MaxBytesReader(w, r.Body, limit)}
	defer func() { s.m.requestBytes.WithLabelValues(transportHTTP, "wire").Add(float64(wire.n)) }()

	src, closeSrc, err := s.decompressor(r.Header.Get("Content-Encoding"), wire)
	if err != nil {
		return ConvertResult{}, nil, readError(err, wire, limit)
	}
	defer closeSrc()

	buf, err := s.readBody(src, body, limit)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.m.receiveTimeouts.WithLabelValues(transportHTTP).Inc()
		}
		return ConvertResult{}, nil, readError(err, wire, limit)
	}
	res, done, err := s.decodeHTTPBody(buf, enc, body, limit)
	if err != nil || enc != encodingProtobuf || !s.reuseRequests {
		// Nothing borrows the body: it goes back now, not after the
		// commit.
		done()
		s.buffers.put(buf)
		if err != nil {
			return ConvertResult{}, nil, err
		}
		return res, noRelease, nil
	}
	return res, func() { done(); s.buffers.put(buf) }, nil
}

// decodeHTTPBody checks the decompressed body buf against the limits,
// charges what decoding it takes and decodes it (convertHTTPBody). Its
// release is never nil.
func (s *Server) decodeHTTPBody(buf []byte, enc bodyEncoding, body *budgetReader, limit int64) (ConvertResult, func(), error) {
	if int64(len(buf)) > limit {
		return ConvertResult{}, noRelease, fail(outcomeTooLarge,
			fmt.Errorf("request body is over the limit of %d bytes after decompression", limit))
	}
	s.m.requestBytes.WithLabelValues(transportHTTP, "decoded").Add(float64(len(buf)))
	protoBytes := len(buf)
	if enc == encodingJSON {
		// OTLP/JSON is larger than its protobuf (hex ids, field names), up
		// to about twice: halving errs towards decoding the request and
		// letting Commit decide, never towards shedding one that fits.
		protoBytes /= 2
	}
	decoded := int64(len(buf)) * decodedPerJSONByte
	if enc == encodingProtobuf {
		decoded = decodedSize(buf)
	}
	if !body.reserveTotal(s.inflight.clamp(decoded)) {
		return ConvertResult{}, noRelease, fail(outcomeOverloaded, errBudgetFull)
	}
	if err := s.admit(protoBytes, transportHTTP); err != nil {
		return ConvertResult{}, noRelease, err
	}
	return s.convertHTTPBody(buf, enc)
}

// convertHTTPBody decodes and converts an OTLP ExportTraceServiceRequest.
// A protobuf body's result may borrow body until release (convertProto);
// a JSON body's shares no memory with it.
func (s *Server) convertHTTPBody(body []byte, enc bodyEncoding) (ConvertResult, func(), error) {
	if enc == encodingJSON {
		td, err := unmarshalJSON(body)
		if err != nil {
			return ConvertResult{}, noRelease, fail(outcomeMalformed, fmt.Errorf("decode otlp/json: %w", err))
		}
		return s.conv.Convert(td), noRelease, nil
	}
	res, release, err := s.convertProto(body)
	if err != nil {
		return ConvertResult{}, release, fail(outcomeMalformed, fmt.Errorf("decode otlp/protobuf: %w", err))
	}
	return res, release, nil
}

// decompressor returns a reader of the decompressed body for a
// Content-Encoding, and the function that releases it.
func (s *Server) decompressor(contentEncoding string, body io.Reader) (io.Reader, func(), error) {
	switch ce := strings.ToLower(strings.TrimSpace(contentEncoding)); ce {
	case "", "identity":
		return body, func() {}, nil
	case "gzip", "x-gzip":
		zr, err := s.gzip.open(body)
		if err != nil {
			return nil, nil, fmt.Errorf("decompress gzip body: %w", err)
		}
		return zr, func() { _ = zr.Close() }, nil
	case zstdName:
		zr, err := s.zstd.Decompress(body)
		if err != nil {
			return nil, nil, fmt.Errorf("decompress zstd body: %w", err)
		}
		return zr, func() { _ = zr.(io.Closer).Close() }, nil
	default:
		return nil, nil, fail(outcomeUnsupportedEncoding,
			fmt.Errorf("unsupported Content-Encoding %q, supported: [gzip, zstd]", contentEncoding))
	}
}

// readError classifies an error met while reading the body: the wire limit
// (413), the connection (400; the sender is probably gone), or the
// compressed data (400).
func readError(err error, wire *countingReader, limit int64) error {
	var re *requestError
	if errors.As(err, &re) {
		return err
	}
	if errors.Is(err, errBudgetFull) {
		return fail(outcomeOverloaded, err)
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.As(wire.err, &tooLarge) {
		return fail(outcomeTooLarge, fmt.Errorf("request body is over the limit of %d bytes", limit))
	}
	if wire.err != nil && !errors.Is(wire.err, io.EOF) {
		return fail(outcomeMalformed, fmt.Errorf("read request body: %w", wire.err))
	}
	return fail(outcomeMalformed, err)
}

// countingReader counts the bytes read through it and keeps the first
// error, so a failure of the connection can be told from one of the
// decompressor reading from it.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// writeHTTPError answers a failed request with a google.rpc.Status body in
// the request's encoding, as OTLP/HTTP specifies, and with Retry-After
// when the sender should retry.
func (s *Server) writeHTTPError(w http.ResponseWriter, enc bodyEncoding, err error) outcome {
	o := outcomeOf(err)
	st := &spb.Status{Code: int32(o.grpcCode()), Message: senderMessage(o, err)}
	if o.retryable() {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(s.cfg.RetryAfter)))
		if detail, aerr := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.cfg.RetryAfter)}); aerr == nil {
			st.Details = append(st.Details, detail)
		}
	}
	var body []byte
	var merr error
	if enc == encodingJSON {
		body, merr = protojson.Marshal(st)
	} else {
		body, merr = proto.Marshal(st)
	}
	if merr != nil {
		writeText(w, o.httpStatus(), st.Message)
		return o
	}
	w.Header().Set("Content-Type", enc.contentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(o.httpStatus())
	_, _ = w.Write(body)
	return o
}

// senderMessage is what the sender is told. Decoding problems are the
// sender's and are explained in full; store and overload problems are
// budgetd's, and their details (addresses, server messages) stay in the
// log and the metrics.
func senderMessage(o outcome, err error) string {
	switch o {
	case outcomeOverloaded:
		return "budgetd is overloaded, retry later"
	case outcomeUnavailable:
		return "budgetd storage is unavailable, retry later"
	case outcomeCanceled:
		return "request canceled"
	}
	return err.Error()
}

// retryAfterSeconds renders a delay as Retry-After's whole seconds, at
// least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// writeText answers with a plain-text body, for requests that are not OTLP
// at all (wrong path, method or content type).
func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
