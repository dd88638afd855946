package ingest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// trickle is how slowly a slow sender writes: one byte per trickleEvery.
// The timeouts the test configures are a small fraction of the time the
// whole message would take, so a sender that gets to its end was not cut
// off.
const trickleEvery = 25 * time.Millisecond

// TestSlowSenders opens connections that send their request one byte at a
// time (slowloris) or nothing at all, and checks that the listeners' read
// timeouts cut them off before the sender is done, and that the server
// still answers a well-behaved sender afterwards.
func TestSlowSenders(t *testing.T) {
	cfg := testConfig()
	cfg.HTTP.ReadHeaderTimeout = 200 * time.Millisecond
	cfg.HTTP.ReadTimeout = 400 * time.Millisecond
	cfg.GRPC.ConnectionTimeout = 200 * time.Millisecond
	ts := startServer(t, openEmbedded(t), cfg)

	body := encode(t, tracesWithBad(7, 5, 0, 0), encodingProtobuf)
	padding := bytes.Repeat([]byte("x"), 200)
	tests := []struct {
		name string
		addr string
		// fast is sent at once, slow byte by byte.
		fast, slow []byte
	}{
		{
			name: "http headers byte by byte", addr: ts.httpAddr,
			slow: fmt.Appendf(nil, "POST /v1/traces HTTP/1.1\r\nHost: budgetd\r\nX-Padding: %s\r\nContent-Type: application/x-protobuf\r\n\r\n", padding),
		},
		{
			name: "http body byte by byte", addr: ts.httpAddr,
			fast: fmt.Appendf(nil, "POST /v1/traces HTTP/1.1\r\nHost: budgetd\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", len(body)+len(padding)),
			slow: append(append([]byte(nil), body...), padding...),
		},
		{name: "grpc silent connection", addr: ts.grpcAddr, slow: make([]byte, 200)},
		{name: "grpc preface byte by byte", addr: ts.grpcAddr, slow: append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), padding...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", tt.addr, 5*time.Second)
			require.NoError(t, err)
			defer conn.Close()
			_, err = conn.Write(tt.fast)
			require.NoError(t, err)

			// The reader sees the server give up: EOF, a reset, or an
			// error answer followed by the close.
			closed := make(chan []byte, 1)
			go func() {
				got, _ := io.ReadAll(conn)
				closed <- got
			}()
			sent := 0
			var answer []byte
			tick := time.NewTicker(trickleEvery)
			defer tick.Stop()
		trickle:
			for sent < len(tt.slow) {
				select {
				case answer = <-closed:
					break trickle
				case <-tick.C:
					if tt.name == "grpc silent connection" {
						sent++ // sends nothing, only counts time
						continue
					}
					if _, err := conn.Write(tt.slow[sent : sent+1]); err != nil {
						answer = <-closed
						break trickle
					}
					sent++
				}
			}
			require.Less(t, sent, len(tt.slow), "the server let a slow sender finish (%d bytes over %s)", sent, time.Duration(sent)*trickleEvery)
			t.Logf("cut off after %d of %d bytes (%s); answer %q", sent, len(tt.slow), time.Duration(sent)*trickleEvery, firstLine(answer))
		})
	}

	// The server still answers the well-behaved.
	resp, err := http.Post("http://"+ts.httpAddr+tracesPath, contentTypeProtobuf, bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// firstLine returns an answer's status line (or its first bytes), for
// the log.
func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 32 {
		b = b[:32]
	}
	return string(bytes.TrimSpace(b))
}
