package crashtest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/store/chsql"
)

// otelcolPath is where `make test-setup` (scripts/install-otelcol.sh) puts
// the Collector.
const otelcolPath = ".cache/otelcol/otelcol-budgetd"

// buildBudgetd builds cmd/budgetd into a temporary directory. The binary is
// built without -race: the process under test is killed, not checked.
func buildBudgetd(t testing.TB) string {
	t.Helper()
	return proctest.BuildBudgetd(t)
}

// freeAddr returns a loopback address whose port was free a moment ago.
// Fixed addresses let a restarted budgetd come back where the Collector
// sends.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// process is a child process of the test.
type process struct {
	name   string
	cmd    *exec.Cmd
	output *proctest.Output
	exited chan error
	err    error
	done   bool
}

func startProcess(t testing.TB, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), output: &proctest.Output{}, exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.Env = append(os.Environ(), env...)
	require.NoError(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if !p.done {
			_ = p.cmd.Process.Kill()
			p.wait()
		}
	})
	return p
}

func (p *process) wait() error {
	if !p.done {
		p.err = <-p.exited
		p.done = true
	}
	return p.err
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait()
}

// stop sends SIGTERM and waits up to timeout for a clean exit.
func (p *process) stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.err, p.done = err, true
		require.NoError(t, err, "%s exited uncleanly\n%s", p.name, p.output.Tail())
	case <-time.After(timeout):
		p.kill()
		t.Fatalf("%s did not stop within %s\n%s", p.name, timeout, p.output.Tail())
	}
}

// waitUntil polls cond every 20 ms until it holds, failing after timeout.
func waitUntil(t testing.TB, what string, timeout time.Duration, p *process, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p != nil {
			select {
			case err := <-p.exited:
				p.err, p.done = err, true
				t.Fatalf("%s exited while waiting for %s: %v\n%s", p.name, what, err, p.output.Tail())
			default:
			}
		}
		if time.Now().After(deadline) {
			msg := ""
			if p != nil {
				msg = p.output.Tail()
			}
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// budgetd is one `budgetd serve` installation: a binary, a config file
// and fixed addresses, started and killed as often as a test likes.
type budgetd struct {
	bin, config, dataDir string
	dsn                  string // the ClickHouse store's, or ""
	grpc, http, api      string
	env                  []string
	proc                 *process
	// writeConfig writes config for the addresses above.
	writeConfig func()
	started     bool // it was ready once: its addresses are fixed
}

// budgetdOptions are what the tests vary.
type budgetdOptions struct {
	// dsn selects the ClickHouse engine; "" is the embedded one.
	dsn string
	// store, when set, is the whole store section (indented by two
	// spaces), and dsn is ignored.
	store string
	// walMaxBytes caps the log; 0 keeps the default.
	walMaxBytes int64
	// ingest is more of the ingest section, indented by two spaces;
	// grpc more of ingest.grpc, indented by four.
	ingest, grpc string
	// extra is more top-level configuration (whole sections), appended.
	extra string
}

func newBudgetd(t testing.TB, bin string, o budgetdOptions) *budgetd {
	t.Helper()
	dir := t.TempDir()
	b := &budgetd{bin: bin, dsn: o.dsn, dataDir: filepath.Join(dir, "data"), grpc: freeAddr(t), http: freeAddr(t), api: freeAddr(t)}
	b.env = []string{"CHDB_LIB_PATH=" + filepath.Join(proctest.RepoRoot(t), ".cache/libchdb/libchdb.so")}
	storeCfg := fmt.Sprintf("  engine: embedded\n  embedded:\n    data_dir: %s\n", b.dataDir)
	if o.dsn != "" {
		storeCfg = fmt.Sprintf("  engine: clickhouse\n  clickhouse:\n    dsn: %s\n", o.dsn)
	}
	if o.store != "" {
		storeCfg = o.store
	}
	walCfg := fmt.Sprintf("      dir: %s\n      flush_interval: 50ms\n", filepath.Join(dir, "wal"))
	if o.walMaxBytes > 0 {
		walCfg += fmt.Sprintf("      max_bytes: %d\n      segment_bytes: %d\n", o.walMaxBytes, o.walMaxBytes/4)
	}
	b.config = filepath.Join(dir, "budgetd.yaml")
	b.writeConfig = func() {
		cfg := fmt.Sprintf(`log:
  level: warn
store:
%sapi:
  endpoint: %s
ingest:
  grpc:
    endpoint: %s
%s  http:
    endpoint: %s
  retry_after: 200ms
%s  durability:
    write_timeout: 2s
    dead_letter_dir: %s
    wal:
%s%s`, storeCfg, b.api, b.grpc, o.grpc, b.http, o.ingest, filepath.Join(dir, "dead-letter"), walCfg, o.extra)
		require.NoError(t, os.WriteFile(b.config, []byte(cfg), 0o600))
	}
	b.writeConfig()
	return b
}

// start runs `budgetd serve` and waits for /readyz, returning how long
// that took (the log replay included).
//
// freeAddr's ports were free a moment before; another process (the tests of
// other packages run alongside) may bind one first. A first start that
// fails on that takes new addresses and tries again, up to three times; a
// restart keeps its addresses, which the test's Collectors send to.
func (b *budgetd) start(t testing.TB) time.Duration {
	t.Helper()
	begin := time.Now()
	for attempt := 1; ; attempt++ {
		b.proc = startProcess(t, "budgetd", b.env, b.bin, "serve", "--config", b.config)
		exited, err := b.waitReady(t)
		if !exited {
			b.started = true
			return time.Since(begin)
		}
		out := b.proc.output.Tail()
		if b.started || attempt == 3 || !strings.Contains(out, "address already in use") {
			t.Fatalf("budgetd exited while waiting for budgetd /readyz: %v\n%s", err, out)
		}
		t.Logf("budgetd could not bind an address a moment after it was free, trying new ones: %v", err)
		b.grpc, b.http, b.api = freeAddr(t), freeAddr(t), freeAddr(t)
		b.writeConfig()
	}
}

// waitReady waits up to a minute for /readyz to answer 200, or for the
// process to exit (exited, with its exit error).
func (b *budgetd) waitReady(t testing.TB) (exited bool, err error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !b.ready() {
		select {
		case err := <-b.proc.exited:
			b.proc.err, b.proc.done = err, true
			return true, err
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 60s waiting for budgetd /readyz\n%s", b.proc.output.Tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false, nil
}

// readyClient bounds each /readyz probe: whatever holds a taken address
// may accept the connection and never answer.
var readyClient = &http.Client{Timeout: 2 * time.Second}

// ready reports whether budgetd's /readyz answers 200.
func (b *budgetd) ready() bool {
	resp, err := readyClient.Get("http://" + b.api + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// collectorConfig is a Collector whose otlp_grpc exporter retries without
// an end and queues what it cannot send yet, as DESIGN §6 expects senders
// to be configured.
func collectorConfig(receiver, target string) string {
	return collectorConfigWith(receiver, target, "    tls:\n      insecure: true\n")
}

// collectorConfigWith is collectorConfig with the exporter's tls and
// headers settings given, indented by four spaces.
func collectorConfigWith(receiver, target, exporterExtra string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  otlp_grpc:
    endpoint: %s
%s    timeout: 5s
    retry_on_failure:
      enabled: true
      initial_interval: 50ms
      max_interval: 500ms
      max_elapsed_time: 0s
    sending_queue:
      enabled: true
      num_consumers: 4
      queue_size: 100000
service:
  telemetry:
    logs:
      level: error
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_grpc]
`, receiver, target, exporterExtra)
}

func startCollector(t testing.TB, receiver, target string) *process {
	t.Helper()
	return startCollectorWith(t, receiver, collectorConfig(receiver, target))
}

func startCollectorWith(t testing.TB, receiver, config string) *process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "otelcol.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	p := startProcess(t, "the Collector", nil, proctest.Tool(t, otelcolPath), "--config", path)
	waitListening(t, p, receiver)
	return p
}

// waitListening waits until p accepts connections on addr.
func waitListening(t testing.TB, p *process, addr string) {
	t.Helper()
	waitUntil(t, p.name+" listening on "+addr, 60*time.Second, p, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

// spanKey is a span's (trace id, span id) as stored: lower-case hex.
type spanKey struct{ trace, span string }

// sender sends OTLP/gRPC requests of spansPerRequest spans with known ids
// and records the ids of every request that was acknowledged.
type sender struct {
	client          ptraceotlp.GRPCClient
	conn            *grpc.ClientConn
	spansPerRequest int
	next            atomic.Uint64 // request counter: ids derive from it

	mu      sync.Mutex
	acked   map[spanKey]struct{}
	sent    int
	refused map[codes.Code]int
}

func newSender(t testing.TB, target string, spansPerRequest int) *sender {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &sender{client: ptraceotlp.NewGRPCClient(conn), conn: conn, spansPerRequest: spansPerRequest,
		acked: map[spanKey]struct{}{}, refused: map[codes.Code]int{}}
}

// request builds request n: one trace whose first span is the root.
func (s *sender) request(n uint64) (ptraceotlp.ExportRequest, []spanKey) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "crashtest")
	ss := rs.ScopeSpans().AppendEmpty()
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[0:8], 0xc0ffee)
	binary.BigEndian.PutUint64(tid[8:16], n+1)
	now := time.Now()
	keys := make([]spanKey, 0, s.spansPerRequest)
	var root pcommon.SpanID
	for i := range s.spansPerRequest {
		var sid pcommon.SpanID
		binary.BigEndian.PutUint64(sid[:], (n+1)<<16|uint64(i+1))
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		if i == 0 {
			root = sid
			sp.SetKind(ptrace.SpanKindServer)
		} else {
			sp.SetParentSpanID(root)
			sp.SetKind(ptrace.SpanKindClient)
		}
		sp.SetName(fmt.Sprintf("op-%d", i))
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		keys = append(keys, spanKey{hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])})
	}
	return ptraceotlp.NewExportRequestFromTraces(td), keys
}

// send sends one request and records the outcome.
func (s *sender) send(ctx context.Context) error {
	req, keys := s.request(s.next.Add(1))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.client.Export(rctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent += len(keys)
	if err != nil {
		s.refused[status.Code(err)]++
		return err
	}
	for _, k := range keys {
		s.acked[k] = struct{}{}
	}
	return nil
}

// run sends from workers goroutines, each pausing every between requests,
// until ctx ends.
func (s *sender) run(ctx context.Context, workers int, every time.Duration) (wait func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					_ = s.send(ctx)
				}
			}
		})
	}
	return wg.Wait
}

func (s *sender) ackedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// storedSpans returns how often each (trace id, span id) is stored.
func storedSpans(t testing.TB, st *chsql.Store) map[spanKey]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := st.Conn().Query(ctx, "SELECT trace_id, span_id, toUInt64(count()) FROM "+st.Database()+".spans GROUP BY trace_id, span_id", nil)
	require.NoError(t, err)
	defer r.Close()
	out := map[spanKey]uint64{}
	for r.Next() {
		var k spanKey
		var n uint64
		require.NoError(t, r.Scan(&k.trace, &k.span, &n))
		out[k] = n
	}
	require.NoError(t, r.Err())
	return out
}

// verdict compares what the sender saw acknowledged with the store.
type verdict struct {
	sent, acked, stored, storedRows, lost, duplicates int
}

func compare(acked map[spanKey]struct{}, stored map[spanKey]uint64) verdict {
	v := verdict{acked: len(acked), stored: len(stored)}
	for _, n := range stored {
		v.storedRows += int(n)
		if n > 1 {
			v.duplicates += int(n - 1)
		}
	}
	for k := range acked {
		if stored[k] == 0 {
			v.lost++
		}
	}
	return v
}

// peakRSS returns the largest resident set of the test's children so far,
// in bytes (Linux reports it in KiB).
func peakRSS(p *process) int64 {
	if p == nil || p.cmd.ProcessState == nil {
		return 0
	}
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && runtime.GOOS == "linux" {
		return ru.Maxrss << 10
	}
	return 0
}

// TestStartTakesNewAddressesWhenOneIsTaken checks the harness's retry: a
// first start whose API address another process holds comes up on new
// addresses.
func TestStartTakesNewAddressesWhenOneIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	b := newBudgetd(t, buildBudgetd(t), budgetdOptions{})
	b.api = taken.Addr().String()
	b.writeConfig()
	b.start(t)
	require.NotEqual(t, taken.Addr().String(), b.api)
	b.proc.stop(t, 30*time.Second)
}
