package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
)

// ZooKeeper is one standalone ZooKeeper server (Debian's zookeeper
// package, run by its Java main class) on a free loopback port.
type ZooKeeper struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	waitCh chan error
}

// zkClassPath is where Debian installs ZooKeeper's jar and the libraries it
// needs.
const zkClassPath = "/usr/share/java/*:/usr/share/zookeeper/*"

// zkMain is ZooKeeper's server entry point; given one zoo.cfg without
// server.N lines it runs standalone.
const zkMain = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// StartZooKeeper starts a ZooKeeper server with its data in dir and waits
// until it answers; the caller stops it. A missing installation is an
// error naming the setup command.
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, errors.New("java not found: run `make test-setup` (it installs zookeeper, which brings Java)")
	}
	if _, err := os.Stat("/usr/share/zookeeper"); err != nil {
		return nil, errors.New("zookeeper not installed (/usr/share/zookeeper): run `make test-setup`")
	}
	z := &ZooKeeper{dir: dir}
	if z.port, err = clickhousetest.FreePort(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o750); err != nil {
		return nil, fmt.Errorf("create zookeeper data dir: %w", err)
	}
	// ZooKeeper caps session timeouts at 20 ticks: 2 s ticks let the
	// servers keep their sessions through the pauses of a loaded test
	// machine.
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nadmin.enableServer=false\n"+
		// ruok is how Start tells that the server serves; 3.5 and later
		// answer only whitelisted four-letter words.
		"4lw.commands.whitelist=ruok\n", filepath.Join(dir, "data"), z.port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o640); err != nil {
		return nil, fmt.Errorf("write zoo.cfg: %w", err)
	}
	out, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		return nil, fmt.Errorf("create zookeeper log: %w", err)
	}
	defer out.Close()
	// A small heap: the test's ZooKeeper holds a few hundred nodes, and
	// the JVM's default would reserve a quarter of the machine.
	z.cmd = exec.Command(java, "-Xmx256m", "-Dzookeeper.log.dir="+dir, "-cp", zkClassPath, zkMain, cfgPath)
	z.cmd.Dir = dir
	z.cmd.Stdout, z.cmd.Stderr = out, out
	z.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := z.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	z.waitCh = make(chan error, 1)
	go func() { z.waitCh <- z.cmd.Wait() }()
	if err := z.waitReady(30 * time.Second); err != nil {
		_ = z.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "zookeeper.log"))
		return nil, fmt.Errorf("%w\nzookeeper.log:\n%s", err, tail(log, 3000))
	}
	return z, nil
}

// waitReady polls ruok until the server answers imok, the process exits
// or the wait is over.
func (z *ZooKeeper) waitReady(wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		if z.ruok(ctx) {
			return nil
		}
		select {
		case err := <-z.waitCh:
			z.waitCh <- err // for Stop
			return fmt.Errorf("zookeeper exited before serving: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("zookeeper did not answer ruok on %s within %s", z.Addr(), wait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (z *ZooKeeper) ruok(ctx context.Context) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", z.Addr())
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ruok")); err != nil {
		return false
	}
	answer, _ := io.ReadAll(c)
	return strings.TrimSpace(string(answer)) == "imok"
}

// Addr is the client address, host:port.
func (z *ZooKeeper) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.port) }

// Port is the client port.
func (z *ZooKeeper) Port() int { return z.port }

// Stop stops the server (SIGTERM, SIGKILL after 10 s) and waits for it.
func (z *ZooKeeper) Stop() error {
	if z.cmd == nil {
		return nil
	}
	clickhousetest.StopGroup(z.cmd, z.waitCh)
	z.cmd = nil
	return nil
}
