package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/durable/record"
	"github.com/budgetd/budgetd/store/chsql"
)

// slowSenders is more than ingest.max_concurrent_requests (64): before
// request slots were taken only once a request was read, this many
// senders trickling their bodies held every slot, and every other request
// was answered 503 until the read timeout cut them off.
const slowSenders = 70

// TestSlowSendersHoldNoSlots opens 70 HTTP requests whose bodies stop
// after a few bytes, and 70 gRPC streams whose messages stop after a few
// bytes, and checks that a well-behaved sender on each port is still
// acknowledged while all of them are open (the server is seen holding
// them: reserved body bytes, open streams).
func TestSlowSendersHoldNoSlots(t *testing.T) {
	st := openEmbedded(t)
	cfg := testConfig()
	cfg.HTTP.ReadTimeout = time.Minute // longer than the test: nothing is cut off
	cfg.GRPC.ReceiveTimeout = time.Minute
	ts := startServer(t, st, cfg)
	good := encode(t, tracesWithBad(9, 5, 0, 0), encodingProtobuf)

	// HTTP: headers and the first 10 bytes of a 1,000-byte body.
	trickleHTTP(t, ts.httpAddr, slowSenders)
	waitFor(t, "the slow HTTP bodies to be read", func() bool {
		return metricValue(t, ts, "budgetd_ingest_in_flight_bytes", nil) >= slowSenders*budgetStep
	})

	// gRPC: 70 streams on one connection, each with a message prefix
	// announcing 1,000 bytes and 10 of them.
	trickleGRPC(t, ts.grpcAddr, slowSenders)
	waitFor(t, "the slow gRPC streams to be open", func() bool {
		return metricValue(t, ts, "budgetd_ingest_grpc_streams", nil) >= slowSenders
	})

	a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", good)
	require.Equal(t, http.StatusOK, a.status, "body: %s", a.body)
	_, err := exportRaw(t, dialGRPC(t, ts), encode(t, tracesWithBad(10, 5, 0, 0), encodingProtobuf), "")
	require.NoError(t, err, "a good gRPC sender is acknowledged")
	require.Equal(t, uint64(10), countRows(t, st))
}

// TestSlowSendersAreCutOff checks that a request whose body or message
// stops arriving is ended after ingest.http.read_timeout or
// ingest.grpc.receive_timeout, counted, and gives back what it held: the
// sender sees its stream end, the reserved bytes and open streams return
// to zero.
func TestSlowSendersAreCutOff(t *testing.T) {
	st := openEmbedded(t)
	cfg := testConfig()
	cfg.HTTP.ReadTimeout = 500 * time.Millisecond
	cfg.GRPC.ReceiveTimeout = 500 * time.Millisecond
	ts := startServer(t, st, cfg)
	timeouts := func(transport string) float64 {
		return metricValue(t, ts, "budgetd_ingest_receive_timeouts_total", map[string]string{"transport": transport})
	}

	trickleHTTP(t, ts.httpAddr, 3)
	ended := trickleGRPC(t, ts.grpcAddr, 3)
	waitFor(t, "the slow senders to be cut off", func() bool {
		return timeouts(transportHTTP) == 3 && timeouts(transportGRPC) == 3
	})
	for range 3 {
		select {
		case id := <-ended:
			t.Logf("stream %d ended by the server", id)
		case <-time.After(10 * time.Second):
			t.Fatal("a cut-off gRPC stream was not ended towards its sender")
		}
	}
	waitFor(t, "what they held to be given back", func() bool {
		return metricValue(t, ts, "budgetd_ingest_in_flight_bytes", nil) == 0 &&
			metricValue(t, ts, "budgetd_ingest_grpc_streams", nil) == 0
	})
	good := encode(t, tracesWithBad(4, 5, 0, 0), encodingProtobuf)
	_, err := exportRaw(t, dialGRPC(t, ts), good, "")
	require.NoError(t, err, "budgetd still serves")
}

// trickleHTTP opens n HTTP requests that send their headers and the first
// 10 bytes of a 1,000-byte body, and nothing more.
func trickleHTTP(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		_, err = fmt.Fprintf(conn, "POST /v1/traces HTTP/1.1\r\nHost: budgetd\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n0123456789")
		require.NoError(t, err)
	}
}

// trickleGRPC opens n OTLP/gRPC streams on one connection, each with a
// message prefix announcing 1,000 bytes and 10 of them, and nothing more.
// It returns the ids of the streams the server ends (RST_STREAM, or
// trailers), as they end.
func trickleGRPC(t *testing.T, addr string, n int) <-chan uint32 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	var writing sync.Mutex // a Framer writes from one goroutine at a time
	write := func(f func() error) error {
		writing.Lock()
		defer writing.Unlock()
		return f()
	}
	require.NoError(t, write(func() error { return fr.WriteSettings() }))
	ended := make(chan uint32, n)
	go func() { // answer the server's SETTINGS and PINGs so it keeps the connection
		seen := map[uint32]bool{}
		end := func(id uint32) {
			if !seen[id] {
				seen[id] = true
				ended <- id
			}
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = write(fr.WriteSettingsAck)
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = write(func() error { return fr.WritePing(true, f.Data) })
				}
			case *http2.RSTStreamFrame:
				end(f.StreamID)
			case *http2.HeadersFrame:
				if f.StreamEnded() {
					end(f.StreamID)
				}
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "budgetd"},
		{Name: ":path", Value: "/opentelemetry.proto.collector.trace.v1.TraceService/Export"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		require.NoError(t, enc.WriteField(f))
	}
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], 1000)
	for i := range n {
		id := uint32(2*i + 1)
		require.NoError(t, write(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		}))
		require.NoError(t, write(func() error { return fr.WriteData(id, false, append(prefix, "0123456789"...)) }))
	}
	return ended
}

// TestInFlightChargesDecodedSize checks that a request is charged for
// what it takes decoded, not its bytes: with half of
// ingest.max_in_flight_bytes (8 MiB) held by trickling HTTP bodies, a
// 540 KB request of 60,000 empty attributes (about 9 MiB decoded) is
// refused on both ports as overloaded, to be retried, while a realistic
// request of the same room is taken. Charged by its bytes, it was taken.
func TestInFlightChargesDecodedSize(t *testing.T) {
	st := openEmbedded(t)
	cfg := testConfig()
	cfg.HTTP.MaxRequestBytes = 4 << 20
	cfg.MaxInFlightBytes = 8 << 20
	cfg.HTTP.ReadTimeout = time.Minute // longer than the test: nothing is cut off
	ts := startServer(t, st, cfg)

	trickleHTTP(t, ts.httpAddr, 16)
	waitFor(t, "the trickling bodies to hold half the budget", func() bool {
		return metricValue(t, ts, "budgetd_ingest_in_flight_bytes", nil) == 16*budgetStep
	})
	heavy := manyAttrs(t, 60, 1000, 0, func(m pcommon.Map, k string) { m.PutEmpty(k) })
	require.Less(t, len(heavy), 8<<20-16*budgetStep, "its bytes alone would fit")
	require.Greater(t, decodedSize(heavy), int64(4<<20), "decoded, it does not")

	requireShedThenTaken(t, ts, st, heavy)
}

// requireShedThenTaken checks that heavy is refused on both ports as
// overloaded, to be retried, and that a realistic request of 50 spans is
// taken and stored after it.
func requireShedThenTaken(t *testing.T, ts *testServer, st *chsql.Store, heavy []byte) {
	t.Helper()
	_, err := exportRaw(t, dialGRPC(t, ts), heavy, "")
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	a := post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", heavy)
	require.Equal(t, http.StatusServiceUnavailable, a.status, "body: %s", a.body)

	light := encode(t, tracesWithBad(11, 50, 0, 0), encodingProtobuf)
	a = post(t, ts, http.MethodPost, tracesPath, contentTypeProtobuf, "", light)
	require.Equal(t, http.StatusOK, a.status, "body: %s", a.body)
	waitFor(t, "the realistic request's spans to be stored", func() bool { return countRows(t, st) == 50 })
}

// TestInFlightChargesTheLogRecord checks that, behind the write-ahead log,
// a request is charged the log record Commit encodes its spans into as
// well as what it takes decoded: with half of ingest.max_in_flight_bytes
// (8 MiB) held by trickling HTTP bodies, a 2.3 MB request of long strings
// that fits decoded (2.6 MB) but not with its record (2.3 MB more) is
// refused on both ports as overloaded, to be retried, while a realistic
// request is taken. Charged without its record, it was taken.
func TestInFlightChargesTheLogRecord(t *testing.T) {
	st := openEmbedded(t)
	dir := t.TempDir()
	dcfg := durable.DefaultConfig()
	dcfg.WAL.Dir = filepath.Join(dir, "wal")
	dcfg.DeadLetterDir = filepath.Join(dir, "dead-letter")
	d, err := durable.OpenLog(dcfg, durable.Settings{Store: st})
	require.NoError(t, err)
	cfg := testConfig()
	cfg.HTTP.MaxRequestBytes = 4 << 20
	cfg.MaxInFlightBytes = 8 << 20
	cfg.HTTP.ReadTimeout = time.Minute // longer than the test: nothing is cut off
	reg := prometheus.NewRegistry()
	ts := startServerWith(t, cfg, Settings{Logger: testLogger(t), Durability: d, Registerer: reg}, reg)

	trickleHTTP(t, ts.httpAddr, 16)
	waitFor(t, "the trickling bodies to hold half the budget", func() bool {
		return metricValue(t, ts, "budgetd_ingest_in_flight_bytes", nil) == 16*budgetStep
	})
	long := manyAttrs(t, 25, 60, 0, func(m pcommon.Map, k string) { m.PutStr(k, string(make([]byte, 1500))) })
	c, err := NewConverter(DefaultLimits())
	require.NoError(t, err)
	res, err := c.ConvertProto(long)
	require.NoError(t, err)
	room := int64(8<<20 - 16*budgetStep)
	require.Less(t, decodedSize(long), room-budgetStep, "decoded, it fits (with the body's last read step)")
	require.Greater(t, decodedSize(long)+int64(record.Size(res.Spans)), room, "with its record, it does not")

	requireShedThenTaken(t, ts, st, long)
	// An HTTP request gives its charge back after its response is written:
	// wait for it rather than read the gauge once.
	waitFor(t, "each request to give its charge back", func() bool {
		return metricValue(t, ts, "budgetd_ingest_in_flight_bytes", nil) == 16*budgetStep
	})
}

// TestBodyHoldsWhatItIsCharged reads a 5.5 MB gzipped body, larger than
// twenty chunks and not a multiple of one, and checks that reading it
// allocated no more than the in-flight budget was charged for it, and that
// the body is read whole. A growing bytes.Buffer allocated about three
// times its charge.
func TestBodyHoldsWhatItIsCharged(t *testing.T) {
	want := make([]byte, 5_500_000+12345)
	for i := range want {
		want[i] = byte(i * 7 % 251)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, err := w.Write(want)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	zr, err := gzip.NewReader(&z)
	require.NoError(t, err)

	s := &Server{}
	br := &budgetReader{budget: &byteBudget{max: 1 << 30, gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "in_flight"})}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := s.readBody(zr, br, 20<<20)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, want, got)
	allocated := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("body %d bytes: allocated %d, charged %d", len(want), allocated, br.reserved)
	require.LessOrEqual(t, allocated, br.reserved+64<<10)
	require.GreaterOrEqual(t, br.reserved, int64(2*len(want)), "the chunks and the gathered body")
}
