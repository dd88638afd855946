// Package proctest helps tests that run real processes: it finds the tools
// `make test-setup` installs under the repository's .cache, starts and stops
// them, and collects a process's output for failure messages.
package proctest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RepoRoot returns the directory holding go.mod, above the test's working
// directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// BuildBudgetd builds the repository's budgetd into the test's temporary
// directory and returns the binary's path.
func BuildBudgetd(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "budgetd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/budgetd")
	build.Dir = RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Tool returns the path of a tool installed by `make test-setup` (rel is
// relative to the repository root). A missing tool fails the test: it is a
// setup bug, not a reason to skip.
func Tool(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found: run `make test-setup` (%v)", rel, err)
	}
	return p
}

// Output is a bytes.Buffer safe for a process's output copier and the test
// reading it at once.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Tail returns the last 8000 bytes written, for failure messages.
func (o *Output) Tail() string {
	s := o.String()
	if len(s) > 8000 {
		s = "…" + s[len(s)-8000:]
	}
	return s
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for processes that cannot be told to pick their own.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Process is a tool running for a test.
type Process struct {
	// Output collects what the process writes to stdout and stderr.
	Output *Output

	name   string
	cmd    *exec.Cmd
	exited chan error // receives Wait's result once; put back by who reads it
	once   sync.Once
}

// Start runs bin with args; name says what it is in failure messages ("the
// Collector"). It is stopped when the test ends.
func Start(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Output: &Output{}, name: name, cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.Output, p.Output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// StartConfigured runs bin --config FILE, FILE holding the YAML config (a
// Collector's or Jaeger v2's), and waits until each of addrs accepts
// connections.
func StartConfigured(t testing.TB, name, bin, config string, addrs ...string) *Process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := Start(t, name, bin, "--config", path)
	for _, addr := range addrs {
		p.WaitListening(t, addr)
	}
	return p
}

// WaitListening waits until something accepts connections on addr, failing
// the test when the process exits first or after 60 s.
func (p *Process) WaitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("%s exited before listening on %s: %v\n%s", p.name, addr, err, p.Output.Tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within 60s\n%s", p.name, addr, p.Output.Tail())
		}
	}
}

// Stop asks the process to shut down (SIGTERM: a Collector drains its
// exporters) and waits for it, killing it after 30 s. An exit status other
// than 0 fails the test. Stopping twice is stopping once.
func (p *Process) Stop(t testing.TB) {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.exited:
			if err != nil {
				t.Errorf("%s exited with %v\n%s", p.name, err, p.Output.Tail())
			}
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not stop within 30s\n%s", p.name, p.Output.Tail())
		}
	})
}
