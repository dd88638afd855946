package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// StartJaeger runs Jaeger v2 (an OpenTelemetry Collector distribution) with
// an otlp receiver writing straight into its badger storage: no batch
// processor and no exporter queue, so an acknowledgement means the spans
// were written to badger, and its acknowledged rate is its stored rate.
// The data lives under dir/badger and outlives the process
// (StartJaegerQuery reads it back).
func StartJaeger(ctx context.Context, binary, dir string) (*Target, error) {
	return startJaeger(ctx, binary, dir, false)
}

// StartJaegerQuery runs Jaeger on the badger data a StartJaeger target left
// in dir, with the jaeger_query extension on a free loopback port
// (Target.Query), to read back what was stored. The benchmarked target runs
// without it: nothing requires it, and a query service has no part in
// receiving spans.
func StartJaegerQuery(ctx context.Context, binary, dir string) (*Target, error) {
	return startJaeger(ctx, binary, dir, true)
}

func startJaeger(ctx context.Context, binary, dir string, withQuery bool) (*Target, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	endpoint := loopback(ports[0])
	query := ""
	if withQuery {
		query = loopback(ports[1])
	}
	config := jaegerConfig(endpoint, query, loopback(ports[2]), filepath.Join(dir, "badger"))
	name, ready := "jaeger", endpoint
	if withQuery {
		name, ready = "jaeger-query", query
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	cmd, err := start(ctx, dir, name, ready, binary, "--config", path)
	if err != nil {
		return nil, err
	}
	return &Target{Name: "Jaeger v2 (badger)", Endpoint: endpoint, Query: query, AckMeansStored: true,
		procs: []*exec.Cmd{cmd}}, nil
}

// jaegerConfig is Jaeger's configuration, after its own
// cmd/jaeger/config-badger.yaml, minus what would make an acknowledgement
// mean less than "written" or bind a fixed port:
//   - no batch processor (the sample has one: it acknowledges on queueing);
//   - the storage exporter's queue off; off is its default, stated here
//     because a queue would acknowledge before writing;
//   - badger on disk (ephemeral false) with Jaeger's default consistency:
//     false, writes are not fsynced one by one;
//   - the Collector's own metrics off (level none opens no port);
//   - jaeger_query, when query is set, on loopback ports: its defaults are
//     fixed ports on every interface (16686, 16685).
func jaegerConfig(endpoint, query, queryGRPC, badgerDir string) string {
	extensions := "[jaeger_storage]"
	queryExtension := ""
	if query != "" {
		extensions = "[jaeger_storage, jaeger_query]"
		queryExtension = fmt.Sprintf(`  jaeger_query:
    enable_tracing: false
    storage:
      traces: bench_store
    http:
      endpoint: %s
    grpc:
      endpoint: %s
`, query, queryGRPC)
	}
	return fmt.Sprintf(`extensions:
  jaeger_storage:
    backends:
      bench_store:
        badger:
          directories:
            keys: %[1]s/keys
            values: %[1]s/values
          ephemeral: false
          consistency: false
%[2]sreceivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[3]s
exporters:
  jaeger_storage_exporter:
    trace_storage: bench_store
    queue:
      enabled: false
service:
  extensions: %[4]s
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
`, badgerDir, queryExtension, endpoint, extensions)
}

// JaegerTraceSpans asks Jaeger's query service (api_v3) for one trace and
// returns the ids of its spans; none when Jaeger has no such trace.
func JaegerTraceSpans(ctx context.Context, query, traceID string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+query+"/api/v3/traces/"+traceID, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query jaeger trace %s: %w", traceID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query jaeger trace %s: %s", traceID, resp.Status)
	}
	var body struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						TraceID string `json:"traceId"`
						SpanID  string `json:"spanId"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query jaeger trace %s: %w", traceID, err)
	}
	var ids []string
	for _, rs := range body.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				ids = append(ids, sp.SpanID)
			}
		}
	}
	return ids, nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for len(out) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
