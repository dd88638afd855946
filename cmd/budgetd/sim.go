package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/budgetd/budgetd/sim"
)

const simUsage = `Usage:
  budgetd sim SCENARIO [flags]     run one scenario (a YAML file, or an embedded one by name)
  budgetd sim --demo [flags]       run every embedded scenario, each under its own service prefix

Starts the scenario's chain of services on 127.0.0.1, sends its requests
through it, exports every hop's spans over OTLP, and prints what really
happened (the ground truth), to compare with what budgetd reports. See
docs/experiments.md for the scenario format.

Embedded scenarios: %s

Flags:
`

// simCmd is `budgetd sim`.
func simCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("sim", flag.ContinueOnError)
	endpoint := flags.String("otlp", "localhost:4317", "OTLP `endpoint`: host:port (plaintext) or a URL")
	protocol := flags.String("otlp-protocol", sim.ProtocolGRPC, "OTLP `protocol`: grpc or http")
	requests := flags.Int("requests", 0, "requests per scenario (default: the scenario's own)")
	truthPath := flags.String("truth", "", "write the ground truth as JSON to `file`")
	demo := flags.Bool("demo", false, "run every embedded scenario")
	strip := flags.Bool("strip-budget", false, "remove every budget.* attribute and event and every budget header from the spans (see what budgetd finds without instrumentation)")
	prefix := flags.String("service-prefix", "", "put `prefix` before every service name (--demo uses the scenario's name and '/')")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), simUsage, strings.Join(sim.Demo, ", "))
		flags.PrintDefaults()
	}
	positional, help, err := parseInterspersed(flags, args, stdout, stderr)
	if help || err != nil {
		return err
	}

	type run struct {
		scenario sim.Scenario
		prefix   string
	}
	var runs []run
	switch {
	case *demo && len(positional) > 0:
		return usageError{"sim: give a scenario or --demo, not both"}
	case *demo:
		for _, name := range sim.Demo {
			s, err := sim.Embedded(name)
			if err != nil {
				return err
			}
			runs = append(runs, run{scenario: s, prefix: *prefix + s.Name + "/"})
		}
	case len(positional) == 1:
		s, err := loadScenario(positional[0])
		if err != nil {
			return err
		}
		runs = append(runs, run{scenario: s, prefix: *prefix})
	default:
		flags.SetOutput(stderr)
		flags.Usage()
		return usageError{"sim: give one scenario file or --demo"}
	}

	cfg := sim.DefaultConfig()
	cfg.Endpoint, cfg.Protocol, cfg.Requests = *endpoint, *protocol, *requests
	cfg.StripBudget = *strip
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var truths []*sim.Truth
	var runErr error
	for _, r := range runs {
		cfg.ServicePrefix = r.prefix
		fmt.Fprintf(stderr, "budgetd sim: running %s\n", r.scenario.Name)
		t, err := sim.Run(ctx, r.scenario, cfg, sim.Settings{Logger: log})
		if t != nil {
			truths = append(truths, t)
			printTruth(stdout, r.scenario, t)
		}
		if err != nil {
			runErr = fmt.Errorf("sim %s: %w", r.scenario.Name, err)
			break
		}
	}
	if *truthPath != "" {
		if err := writeTruth(*truthPath, truths); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (the flag package stops at the first positional).
// --help prints the usage to stdout, once.
func parseInterspersed(flags *flag.FlagSet, args []string, stdout, stderr io.Writer) (positional []string, help bool, err error) {
	usage := flags.Usage
	flags.Usage = func() {} // printed below, to the right stream
	defer func() { flags.Usage = usage }()
	flags.SetOutput(stderr)
	for {
		if err := flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				flags.SetOutput(stdout)
				usage()
				return nil, true, nil
			}
			usage()
			return nil, false, usageError{err.Error()}
		}
		if flags.NArg() == 0 {
			return positional, false, nil
		}
		positional = append(positional, flags.Arg(0))
		args = flags.Args()[1:]
	}
}

// loadScenario reads a scenario file, or an embedded scenario by name when
// no such file exists.
func loadScenario(arg string) (sim.Scenario, error) {
	if _, err := os.Stat(arg); errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(arg, `/\.`) {
		if s, eerr := sim.Embedded(arg); eerr == nil {
			return s, nil
		}
	}
	return sim.Load(arg)
}

// writeTruth writes the runs' ground truth as {"scenarios": [...]}.
func writeTruth(path string, truths []*sim.Truth) error {
	if truths == nil {
		truths = []*sim.Truth{}
	}
	data, err := json.MarshalIndent(struct {
		Scenarios []*sim.Truth `json:"scenarios"`
	}{truths}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode ground truth: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write ground truth: %w", err)
	}
	return nil
}

// printTruth prints the summary of one run, in scenario and real time.
func printTruth(w io.Writer, sc sim.Scenario, t *sim.Truth) {
	s := t.Summary
	fmt.Fprintf(w, "%s: %s\n", sc.Name, sc.Description)
	fmt.Fprintf(w, "  policy %s, time scale %g, %d requests, %d spans exported\n", sc.Policy, t.TimeScale, s.Requests, t.Spans.Exported)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tscenario\treal\t\n")
	dur := func(name string, m sim.Ms) {
		fmt.Fprintf(tw, "  %s\t%.1f ms\t%.1f ms\t\n", name, m.Scenario, m.Real)
	}
	dur("p50 end-to-end", s.LatencyP50)
	dur("p99 end-to-end", s.LatencyP99)
	dur("orphaned work per failed request", s.OrphanedWorkPerFailedRequest)
	dur("orphaned work in all", s.OrphanedWork)
	dur("busy after the client left, per failed request", s.BusyAfterClientLeftPerFailedRequest)
	_ = tw.Flush()
	fmt.Fprintf(w, "  success rate %.1f %%; %s calls per request %.2f (most %d, %d in all)\n",
		100*s.SuccessRate, t.Hops[len(t.Hops)-1].Service, s.LeafCallsMean, s.LeafCallsMax, s.LeafCalls)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  hop\tcalls\tattempts\torphaned, scenario\torphaned, real\n")
	for _, h := range t.Hops {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f ms\t%.1f ms\n", h.Service, h.Calls, h.Attempts, h.OrphanedWork.Scenario, h.OrphanedWork.Real)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}
