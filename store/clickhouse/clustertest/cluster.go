// Package clustertest starts a real ClickHouse cluster for tests: a
// standalone ZooKeeper and shards × replicas clickhouse-server processes
// (Debian's 18.16, installed by `make test-setup`) on free loopback ports,
// configured as docs/scale-out.md describes, and stopped when the test
// ends.
package clustertest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
)

// Name is the cluster's name in every server's remote_servers: what
// store.clickhouse.cluster names.
const Name = "budgetd_test"

// Cluster is a running ClickHouse cluster.
type Cluster struct {
	ZooKeeper *ZooKeeper
	// Shards holds each shard's replicas, in remote_servers order.
	Shards [][]*clickhousetest.Server
}

// Start starts ZooKeeper and a cluster of shards × replicas servers for
// the test and stops them all at cleanup. A missing server or ZooKeeper
// fails the test: it is a setup bug, not a reason to skip.
func Start(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	c, err := StartIn(t.TempDir(), shards, replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logErrors(t)
		}
		_ = c.Stop()
	})
	return c
}

// StartIn starts a cluster with its data under dir; the caller stops it.
func StartIn(dir string, shards, replicas int) (*Cluster, error) {
	zk, err := StartZooKeeper(filepath.Join(dir, "zookeeper"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{ZooKeeper: zk}
	// A port found free can be taken by another process before its server
	// binds it; then the cluster is started again on other ports, each
	// attempt in its own directories.
	for attempt := 1; ; attempt++ {
		err = c.startServers(filepath.Join(dir, fmt.Sprintf("attempt%d", attempt)), shards, replicas)
		if err == nil {
			return c, nil
		}
		_ = c.stopServers()
		if !errors.Is(err, clickhousetest.ErrPortTaken) || attempt == 3 {
			_ = zk.Stop()
			return nil, err
		}
	}
}

func (c *Cluster) startServers(dir string, shards, replicas int) error {
	c.Shards = make([][]*clickhousetest.Server, shards)
	for sh := range c.Shards {
		for r := range replicas {
			d := filepath.Join(dir, fmt.Sprintf("s%dr%d", sh+1, r+1))
			if err := os.MkdirAll(d, 0o750); err != nil {
				return fmt.Errorf("create server dir: %w", err)
			}
			s, err := clickhousetest.New(d)
			if err != nil {
				return err
			}
			c.Shards[sh] = append(c.Shards[sh], s)
		}
	}
	for sh, servers := range c.Shards {
		for r, s := range servers {
			if err := s.WriteConfig(c.serverConfig(sh, r), Profile); err != nil {
				return fmt.Errorf("write config of shard %d replica %d: %w", sh+1, r+1, err)
			}
		}
	}
	for _, servers := range c.Shards {
		for _, s := range servers {
			if err := s.Start(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Profile is the settings docs/scale-out.md asks for in the profile of
// budgetd's user (deploy/clickhouse-cluster/budgetd-profile.xml): a
// shard's reads and writes go to its first healthy replica, so a store
// reads what it has just written although replicas copy each other's
// parts a moment later.
const Profile = "            <load_balancing>in_order</load_balancing>\n"

// serverConfig is server r of shard sh's part of the cluster.
func (c *Cluster) serverConfig(sh, r int) string {
	m := Member{Cluster: Name, ZooKeeper: c.ZooKeeper.Addr(), Shard: sh + 1, Replica: r + 1,
		Host: "127.0.0.1", InterserverPort: c.Shards[sh][r].InterserverPort()}
	for _, servers := range c.Shards {
		var addrs []string
		for _, s := range servers {
			addrs = append(addrs, s.Addr())
		}
		m.Shards = append(m.Shards, addrs)
	}
	return m.Config()
}

// Member is one server's place in a cluster.
type Member struct {
	Cluster         string     // the remote_servers cluster's name
	ZooKeeper       string     // host:port
	Shard, Replica  int        // 1-based: the {shard} and {replica} macros
	Host            string     // where the other replicas reach this one
	InterserverPort int        // … for its parts
	Shards          [][]string // every shard's replicas, native host:port
}

// Config is what makes the server a member of the cluster, elements of
// config.xml's root; deploy/clickhouse-cluster/ has the same for four
// hosts, and docs/scale-out.md explains each:
//   - zookeeper: where replicas coordinate and the ON CLUSTER DDL queue is;
//   - macros: the {shard} and {replica} in the tables' ZooKeeper paths;
//   - interserver_http_*: where the other replicas fetch its parts;
//   - distributed_ddl: the queue ON CLUSTER statements go through;
//   - remote_servers: the cluster, every shard's replicas, with
//     internal_replication so a Distributed insert writes one replica and
//     the replicated table copies it to the others.
func (m Member) Config() string {
	var b strings.Builder
	zkHost, zkPort, _ := net.SplitHostPort(m.ZooKeeper)
	fmt.Fprintf(&b, "    <zookeeper>\n        <node><host>%s</host><port>%s</port></node>\n    </zookeeper>\n", zkHost, zkPort)
	fmt.Fprintf(&b, "    <macros>\n        <shard>%02d</shard>\n        <replica>r%d</replica>\n    </macros>\n", m.Shard, m.Replica)
	fmt.Fprintf(&b, "    <interserver_http_host>%s</interserver_http_host>\n    <interserver_http_port>%d</interserver_http_port>\n",
		m.Host, m.InterserverPort)
	b.WriteString("    <distributed_ddl>\n        <path>/clickhouse/task_queue/ddl</path>\n    </distributed_ddl>\n")
	fmt.Fprintf(&b, "    <remote_servers>\n        <%s>\n", m.Cluster)
	for _, replicas := range m.Shards {
		b.WriteString("            <shard>\n                <internal_replication>true</internal_replication>\n")
		for _, addr := range replicas {
			host, port, _ := net.SplitHostPort(addr)
			fmt.Fprintf(&b, "                <replica><host>%s</host><port>%s</port></replica>\n", host, port)
		}
		b.WriteString("            </shard>\n")
	}
	fmt.Fprintf(&b, "        </%s>\n    </remote_servers>\n", m.Cluster)
	return b.String()
}

// DSN is the clickhouse:// address of every server, database db: a store
// on it connects to the first that answers.
func (c *Cluster) DSN(db string) string {
	var hosts []string
	for _, servers := range c.Shards {
		for _, s := range servers {
			hosts = append(hosts, s.Addr())
		}
	}
	return "clickhouse://" + strings.Join(hosts, ",") + "/" + db
}

// Servers lists every server, shard by shard.
func (c *Cluster) Servers() []*clickhousetest.Server {
	var out []*clickhousetest.Server
	for _, servers := range c.Shards {
		out = append(out, servers...)
	}
	return out
}

// Stop stops every server, then ZooKeeper.
func (c *Cluster) Stop() error {
	err := c.stopServers()
	return errors.Join(err, c.ZooKeeper.Stop())
}

func (c *Cluster) stopServers() error {
	var errs []error
	for _, s := range c.Servers() {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}

// logErrors logs the end of every server's error log, for a failed test:
// the test's directory goes with it.
func (c *Cluster) logErrors(t testing.TB) {
	for _, s := range c.Servers() {
		log, err := os.ReadFile(filepath.Join(s.Dir(), "log", "error.log"))
		if err == nil && len(log) > 0 {
			t.Logf("%s error.log:\n%s", s.Addr(), tail(log, 3000))
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
