package ingest

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// benchSpans is the size of one benchmark request: a Collector batch of a
// thousand spans, the default send_batch_size order of magnitude.
const benchSpans = 1000

// BenchmarkDecodeConvert measures the ingest hot path for one OTLP/protobuf
// request: unmarshal, then convert to schema spans. MB/s is request bytes.
func BenchmarkDecodeConvert(b *testing.B) {
	benchmarkDecodeConvert(b, ingesttest.Spans(1, benchSpans), decodeConvert)
}

// BenchmarkDecodeConvertAttributes is BenchmarkDecodeConvert with 0, 10
// and 40 application attributes added to each span's 10–15: how the
// ingest cost of a span grows with its attributes (docs/performance.md's
// cost model).
func BenchmarkDecodeConvertAttributes(b *testing.B) {
	benchmarkAttributes(b, decodeConvert)
}

// BenchmarkConvertProto is BenchmarkDecodeConvertAttributes through
// ConvertProto, which reads the protobuf without building pdata's objects
// (the path the receivers take).
func BenchmarkConvertProto(b *testing.B) {
	benchmarkAttributes(b, (*Converter).ConvertProto)
}

func benchmarkAttributes(b *testing.B, convert func(*Converter, []byte) (ConvertResult, error)) {
	for _, extra := range []int{0, 10, 40} {
		b.Run("extra="+strconv.Itoa(extra), func(b *testing.B) {
			td := ingesttest.Spans(1, benchSpans)
			ingesttest.AddAttributes(td, extra)
			benchmarkDecodeConvert(b, td, convert)
		})
	}
}

// decodeConvert decodes body with pdata and converts it, as the receivers
// did before ConvertProto.
func decodeConvert(c *Converter, body []byte) (ConvertResult, error) {
	var u ptrace.ProtoUnmarshaler
	td, err := u.UnmarshalTraces(body)
	if err != nil {
		return ConvertResult{}, err
	}
	return c.Convert(td), nil
}

func benchmarkDecodeConvert(b *testing.B, request ptrace.Traces, convert func(*Converter, []byte) (ConvertResult, error)) {
	body := marshalProto(b, request)
	c := newTestConverter(b, DefaultLimits())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	spans := 0
	for b.Loop() {
		res, err := convert(c, body)
		if err != nil {
			b.Fatal(err)
		}
		spans += len(res.Spans)
	}
	b.ReportMetric(float64(len(body))/float64(request.SpanCount()), "proto-B/span")
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkDecode measures the pdata unmarshal alone, to tell how much of
// BenchmarkDecodeConvert is ours.
func BenchmarkDecode(b *testing.B) {
	body := marshalProto(b, ingesttest.Spans(1, benchSpans))
	var u ptrace.ProtoUnmarshaler
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	spans := 0
	for b.Loop() {
		td, err := u.UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		spans += td.SpanCount()
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkConvert measures Convert alone on an already decoded request.
// MB/s is still the protobuf size of the request, so the figures compare
// with BenchmarkDecodeConvert.
func BenchmarkConvert(b *testing.B) {
	td := ingesttest.Spans(1, benchSpans)
	body := marshalProto(b, td)
	c := newTestConverter(b, DefaultLimits())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	spans := 0
	for b.Loop() {
		spans += len(c.Convert(td).Spans)
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkDecodedSize measures the scan that estimates a request's
// decoded memory before it is admitted, to compare with BenchmarkDecode.
func BenchmarkDecodedSize(b *testing.B) {
	body := marshalProto(b, ingesttest.Spans(1, benchSpans))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if decodedSize(body) <= int64(len(body)) {
			b.Fatal("no items counted")
		}
	}
}
