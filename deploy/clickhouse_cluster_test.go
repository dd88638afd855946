package deploy

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/clickhouse/clustertest"
)

// TestClickHouseClusterConfigMatchesTheTest checks that the cluster
// configuration an operator copies from clickhouse-cluster/ has the
// elements the cluster test (store/clickhouse/clustertest) gives its
// servers, no more and no fewer, so the configuration the docs show is the
// one the tests prove.
func TestClickHouseClusterConfigMatchesTheTest(t *testing.T) {
	var deployed []string
	for _, f := range []string{"clickhouse-cluster/cluster.xml", "clickhouse-cluster/macros-ch1.xml"} {
		deployed = append(deployed, elementPaths(t, readFile(t, f))...)
	}
	// The test's servers get it from clickhousetest's base configuration.
	deployed = slices.DeleteFunc(deployed, func(p string) bool { return p == "yandex/mark_cache_size" })
	m := clustertest.Member{Cluster: "budgetd", ZooKeeper: "zk1:2181", Shard: 1, Replica: 1, Host: "ch1", InterserverPort: 9009,
		Shards: [][]string{{"ch1:9000", "ch2:9000"}, {"ch3:9000", "ch4:9000"}}}
	require.Equal(t, dedup(elementPaths(t, "<yandex>"+m.Config()+"</yandex>")), dedup(deployed))

	profile := elementPaths(t, readFile(t, "clickhouse-cluster/budgetd-profile.xml"))
	require.Equal(t, leaves(elementPaths(t, "<yandex><profiles><default>"+clustertest.Profile+"</default></profiles></yandex>")), leaves(profile))
	require.Contains(t, readFile(t, "clickhouse-cluster/budgetd-profile.xml"), "<load_balancing>in_order</load_balancing>")
	require.Contains(t, clustertest.Profile, "<load_balancing>in_order</load_balancing>")
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// elementPaths lists the slash-separated path of every element of doc, in
// document order, the cluster's name replaced by CLUSTER.
func elementPaths(t *testing.T, doc string) []string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var stack, out []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		switch e := tok.(type) {
		case xml.StartElement:
			name := e.Name.Local
			if len(stack) == 2 && stack[1] == "remote_servers" {
				name = "CLUSTER"
			}
			stack = append(stack, name)
			out = append(out, strings.Join(stack, "/"))
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
}

func dedup(paths []string) []string {
	out := slices.Clone(paths)
	slices.Sort(out)
	return slices.Compact(out)
}

// leaves keeps the paths no other path extends.
func leaves(paths []string) []string {
	var out []string
	for _, p := range paths {
		if !slices.ContainsFunc(paths, func(q string) bool { return strings.HasPrefix(q, p+"/") }) {
			out = append(out, p)
		}
	}
	return out
}
