// Package clickhousetest starts a real ClickHouse server for tests: Debian's
// clickhouse-server (installed by `make test-setup`) on free loopback ports
// with a temporary data directory, stopped when the test ends.
package clickhousetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running clickhouse-server.
type Server struct {
	dir             string
	binary          string
	tcpPort         int
	httpPort        int
	interserverPort int    // replicas fetch parts from each other here (clusters only)
	extraConfig     string // elements added to config.xml (WriteConfig)
	extraProfile    string // settings added to the default profile (WriteConfig)

	mu     sync.Mutex
	cmd    *exec.Cmd
	waitCh chan error // receives the process's exit
}

// Binary returns the clickhouse-server executable, or an error naming the
// setup command when it is not installed.
func Binary() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server", "/usr/bin/clickhouse"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("clickhouse-server not found: run `make test-setup`")
}

// Start starts a server for the test and stops it at cleanup. A missing
// server binary fails the test: it is a setup bug, not a reason to skip.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// StartIn starts a server with its data in dir, for programs that are not
// tests (the benchmark harness). The caller stops it.
func StartIn(dir string) (*Server, error) {
	// A port found free can be taken by another test's process before the
	// server binds it: then the server exits, and it is started again on
	// other ports.
	for attempt := 1; ; attempt++ {
		s, err := New(dir)
		if err != nil {
			return nil, err
		}
		if err := s.WriteConfig("", ""); err != nil {
			return nil, err
		}
		err = s.Start()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, ErrPortTaken) || attempt == 3 {
			return nil, err
		}
	}
}

// New prepares a server with its data in dir on free loopback ports,
// without writing its configuration or starting it: a cluster's servers
// must all know each other's ports before any configuration is written.
func New(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, binary: bin}
	for _, port := range []*int{&s.tcpPort, &s.httpPort, &s.interserverPort} {
		if *port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ErrPortTaken is a server that exited because a port it was given was in
// use: start it again on other ports.
var ErrPortTaken = errors.New("a port was in use")

// PID returns the server process id (0 when stopped), for resource figures.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// InterserverPort is the port of the server's interserver_http_port,
// written into its configuration only when a cluster's extra configuration
// names it.
func (s *Server) InterserverPort() int { return s.interserverPort }

// Dir is the server's directory: its configuration, data and logs.
func (s *Server) Dir() string { return s.dir }

// DSN returns the clickhouse:// address of the server with database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", s.tcpPort, db)
}

// Addr returns host:port of the native protocol listener.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.tcpPort) }

// Start (re)starts the server process and waits until it accepts
// connections. It is a no-op when the server runs.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.binary, "--config-file="+filepath.Join(s.dir, "config.xml"))
	if filepath.Base(s.binary) == "clickhouse" {
		cmd = exec.Command(s.binary, "server", "--config-file="+filepath.Join(s.dir, "config.xml"))
	}
	cmd.Dir = s.dir
	out, err := os.Create(filepath.Join(s.dir, "stdout.log"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start clickhouse-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.Addr())
		if err == nil {
			c.Close()
			// Only the server's own listener will do: a stranger on the
			// port leaves the server to exit (ErrPortTaken).
			if ours, err := listensOn(cmd.Process.Pid, s.tcpPort); err != nil {
				_ = cmd.Process.Kill()
				<-exited
				s.cmd = nil
				return fmt.Errorf("clickhouse-server's listener: %w", err)
			} else if ours {
				// Keep the reaper: Stop waits on it.
				s.waitCh = exited
				return nil
			}
		}
		select {
		case err := <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.dir, "stdout.log"))
			errLog, _ := os.ReadFile(filepath.Join(s.dir, "log", "error.log"))
			err = fmt.Errorf("clickhouse-server exited before accepting connections: %v\n%s\nerror.log:\n%s", err, tail(log, 2000), tail(errLog, 4000))
			if bytes.Contains(errLog, []byte("Address already in use")) {
				err = fmt.Errorf("%w: %w", ErrPortTaken, err)
			}
			return err
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			s.cmd = nil
			return fmt.Errorf("clickhouse-server did not accept connections on %s within 30s", s.Addr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	StopGroup(s.cmd, s.waitCh)
	s.cmd = nil
	return nil
}

// StopGroup stops a server started in a process group of its own
// (Setpgid) — SIGTERM to the group, SIGKILL after 10 s — and waits until
// exited, which receives the process's Wait, has reported its end.
func StopGroup(cmd *exec.Cmd, exited <-chan error) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// FreePort asks the kernel for a free loopback port that this process has
// not been given before. The kernel may hand a port it just released out
// again: a cluster's servers get all their ports before any binds one, and
// once two of them got the same port (one server's HTTP port, another's
// native one), the second server exited on it while the first answered in
// its place, so its start looked fine and the cluster waited on a replica
// that was not there until the test timed out.
func FreePort() (int, error) {
	given.mu.Lock()
	defer given.mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, ok := given.ports[port]; !ok {
			given.ports[port] = struct{}{}
			return port, nil
		}
	}
	return 0, errors.New("find free port: the kernel kept offering ports already given out")
}

// given is every port FreePort handed out in this process.
var given = struct {
	mu    sync.Mutex
	ports map[int]struct{}
}{ports: map[int]struct{}{}}

// WriteConfig writes the server's config.xml and users.xml: a single
// server on its loopback ports, plus extra, XML elements placed inside the
// root element (a cluster's zookeeper, macros, remote_servers, …), and
// profile, settings elements added to the default user's profile.
func (s *Server) WriteConfig(extra, profile string) error {
	s.extraConfig, s.extraProfile = extra, profile
	_ = os.Remove(filepath.Join(s.dir, "log", "error.log")) // an earlier attempt's
	for _, d := range []string{"data", "tmp", "user_files", "log", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o750); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]s/log/server.log</log>
        <errorlog>%[1]s/log/error.log</errorlog>
        <console>0</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
%[4]s</yandex>
`, s.dir, s.tcpPort, s.httpPort, s.extraConfig)
	users := `<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>
` + s.extraProfile + `        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(s.dir, "config.xml"), []byte(config), 0o640); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, "users.xml"), []byte(users), 0o640)
}
