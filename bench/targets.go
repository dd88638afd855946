package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Target is one system under load: its processes and its OTLP/gRPC endpoint.
type Target struct {
	Name     string
	Endpoint string
	// API is budgetd's REST API address; empty for the Collector and Jaeger.
	// With several replicas it is the first one's, and Replicas lists all.
	API      string
	Replicas []string
	// Query is Jaeger's query service (HTTP) when it runs one.
	Query string
	// AckMeansStored says the target acknowledges only what it has
	// written to its storage (Jaeger), so its stored rate is its
	// acknowledged rate.
	AckMeansStored bool
	procs          []*exec.Cmd
	extraPID       func() int // a process started elsewhere (the ClickHouse server)
	stop           func() error
}

// PIDs returns the processes whose CPU and memory count for the target.
func (t *Target) PIDs() []int {
	var out []int
	for _, c := range t.procs {
		out = append(out, c.Process.Pid)
	}
	if t.extraPID != nil {
		if p := t.extraPID(); p != 0 {
			out = append(out, p)
		}
	}
	return out
}

// Stop ends the target's processes.
func (t *Target) Stop() error {
	var errs []error
	for _, c := range t.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	if t.stop != nil {
		errs = append(errs, t.stop())
	}
	return errors.Join(errs...)
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs a command with its output in dir/<name>.log and waits until
// addr accepts connections.
func start(ctx context.Context, dir, name, addr string, argv ...string) (*exec.Cmd, error) {
	return startCmd(ctx, dir, name, addr, exec.Command(argv[0], argv[1:]...))
}

// startCmd is start with the command built by the caller (its environment
// set, say).
func startCmd(ctx context.Context, dir, name, addr string, cmd *exec.Cmd) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return cmd, nil
		}
		gone := exited(cmd.Process.Pid)
		if gone || time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			what := "did not listen on " + addr
			if gone {
				what = "exited before it listened on " + addr
			}
			// The log's directory is often removed with the run: its
			// end is in the error.
			return nil, fmt.Errorf("%s %s; the end of %s.log:\n%s", name, what, name, logTail(log.Name(), 10))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exited says whether the child process pid has ended (a zombie, not yet
// waited for) or is gone.
func exited(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command's name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StartCollector runs the OpenTelemetry Collector with an otlp receiver and a
// nop exporter: the cost of receiving OTLP here, with nothing behind it.
func StartCollector(ctx context.Context, binary, dir string) (*Target, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  nop:
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [nop]
`, endpoint)
	path := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	cmd, err := start(ctx, dir, "otelcol", endpoint, binary, "--config", path)
	if err != nil {
		return nil, err
	}
	return &Target{Name: "otelcol → nop", Endpoint: endpoint, procs: []*exec.Cmd{cmd}}, nil
}

// StartBudgetd runs `budgetd serve` with the given store flags, detection on.
func StartBudgetd(ctx context.Context, binary, dir, name string, storeFlags ...string) (*Target, error) {
	grpcPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	apiPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(grpcPort)
	args := append([]string{binary, "serve",
		"--ingest.grpc.endpoint", endpoint, "--ingest.http.endpoint", "",
		"--api.endpoint", "127.0.0.1:" + strconv.Itoa(apiPort),
		"--store.embedded.data-dir", filepath.Join(dir, "data"), "--log.level", "warn"}, storeFlags...)
	cmd, err := start(ctx, dir, "budgetd-"+name, endpoint, args...)
	if err != nil {
		return nil, err
	}
	return &Target{Name: name, Endpoint: endpoint, API: "127.0.0.1:" + strconv.Itoa(apiPort), procs: []*exec.Cmd{cmd}}, nil
}

// APIs returns the REST API addresses of every budgetd process of the
// target: its replicas, or its one budgetd; none for the others.
func (t *Target) APIs() []string {
	switch {
	case len(t.Replicas) > 0:
		return t.Replicas
	case t.API != "":
		return []string{t.API}
	}
	return nil
}

// StartReplicas runs n `budgetd serve` replicas on the ClickHouse store
// dsn behind a Collector whose loadbalancing exporter routes by trace id
// (deploy/collector/loadbalancing.yaml, read from configPath): the
// scale-out deployment of docs/scale-out.md on one machine. The load goes
// to the Collector, whose CPU and memory count with the replicas'.
func StartReplicas(ctx context.Context, budgetdBin, otelcolBin, configPath, dir, dsn string, n int) (*Target, error) {
	t := &Target{Name: fmt.Sprintf("budgetd × %d behind the loadbalancing Collector, clickhouse-server 18.16", n)}
	var backends []string
	for i := range n {
		sub := filepath.Join(dir, "replica-"+strconv.Itoa(i))
		if err := os.MkdirAll(sub, 0o750); err != nil {
			_ = t.Stop()
			return nil, err
		}
		r, err := StartBudgetd(ctx, budgetdBin, sub, "replica-"+strconv.Itoa(i), "--store.engine", "clickhouse", "--store.clickhouse.dsn", dsn,
			"--ingest.durability.wal.dir", filepath.Join(sub, "wal"))
		if err != nil {
			_ = t.Stop()
			return nil, err
		}
		t.procs = append(t.procs, r.procs...)
		t.Replicas = append(t.Replicas, r.API)
		backends = append(backends, r.Endpoint)
	}
	t.API = t.Replicas[0]
	port, err := FreePort()
	if err != nil {
		_ = t.Stop()
		return nil, err
	}
	t.Endpoint = "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(otelcolBin, "--config", configPath)
	cmd.Env = append(os.Environ(), "OTLP_GRPC_ENDPOINT="+t.Endpoint, "BUDGETD_REPLICAS=["+strings.Join(backends, ", ")+"]")
	col, err := startCmd(ctx, dir, "otelcol-lb", t.Endpoint, cmd)
	if err != nil {
		_ = t.Stop()
		return nil, err
	}
	t.procs = append(t.procs, col)
	return t, nil
}

// SetExtra adds a process started elsewhere (a ClickHouse server) to the
// target's accounting, and how to stop it.
func (t *Target) SetExtra(pid func() int, stop func() error) {
	t.extraPID, t.stop = pid, stop
}
