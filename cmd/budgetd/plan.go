package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/budgetd/budgetd/plan"
	"github.com/budgetd/budgetd/store/engine"
)

const planUsage = `Usage:
  budgetd plan [--output table|json|markdown] CHAIN.yaml
  budgetd plan --from-store --path 'svc:op > svc:op > …' [--since 1h] [--until TIME] [--budget 2s] [flags]

Check a planned chain of timeouts and retries against the client's budget:
what every hop receives, gives each attempt and passes down, and every place
where the plan cannot hold. CHAIN.yaml is described in docs/examples/README.md.
With --from-store the chain is built from the hops stored for one call path
(starting at the root), and a split of the budget that holds is suggested.

Exit status: 0 when the plan holds, 1 when it does not (or the store fails),
2 when the input cannot be read.

Flags:
`

// errPlanViolated is returned, after the plan is printed, when it does not
// hold; its exit status 1 is what a CI check looks at.
type errPlanViolated struct{ n int }

func (e errPlanViolated) Error() string {
	if e.n == 1 {
		return "the plan does not hold: 1 violation"
	}
	return fmt.Sprintf("the plan does not hold: %d violations", e.n)
}

func planCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), planUsage); fs.PrintDefaults() }
	flags := addConfigFlags(fs)
	output := fs.String("output", "table", "output `format`: table, json or markdown")
	fromStore := fs.Bool("from-store", false, "build the chain from the hops in the configured store")
	pathFlag := fs.String("path", "", "with --from-store: the call `path` from the root, elements joined by ' > '")
	since := fs.String("since", "1h", "with --from-store: start of the window, a duration before now or an RFC 3339 `time`")
	until := fs.String("until", "", "with --from-store: end of the window, like --since (default now)")
	budgetFlag := fs.String("budget", "", "with --from-store: the client's `budget` (\"2s\", or milliseconds); default the median recorded at the root")
	files, help, err := parseInterleaved(fs, args, stdout, stderr)
	if help || err != nil {
		return err
	}
	format, err := plan.ParseFormat(*output)
	if err != nil {
		return usageError{"plan: --" + err.Error()}
	}

	var chain plan.Chain
	if *fromStore {
		if len(files) > 0 {
			return usageError{"plan: give a chain file or --from-store, not both"}
		}
		if *pathFlag == "" {
			return usageError{"plan: --from-store needs --path 'svc:op > svc:op > …'"}
		}
		if chain, err = chainFromStore(ctx, flags, *pathFlag, *since, *until, *budgetFlag); err != nil {
			return err
		}
	} else {
		var storeOnly []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "path", "since", "until", "budget":
				storeOnly = append(storeOnly, "--"+f.Name)
			}
		})
		switch {
		case len(storeOnly) > 0:
			return usageError{fmt.Sprintf("plan: %s only apply with --from-store", strings.Join(storeOnly, ", "))}
		case len(files) == 0:
			return usageError{"plan: no chain file given (or use --from-store)"}
		case len(files) > 1:
			return usageError{fmt.Sprintf("plan: give one chain file, not %d", len(files))}
		}
		if chain, err = plan.Load(files[0]); err != nil {
			return usageError{"plan: " + err.Error()}
		}
	}

	p := plan.Check(chain)
	if *fromStore || !p.Holds() {
		s := plan.Suggest(chain)
		p.Suggestion = &s
	}
	if err := plan.Write(stdout, p, format); err != nil {
		return err
	}
	if !p.Holds() {
		return errPlanViolated{len(p.Violations)}
	}
	return nil
}

// parseInterleaved parses flags placed before or after the positional
// arguments ("plan CHAIN.yaml --output json"), which flag.Parse alone stops
// at. Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (positional []string, help bool, err error) {
	fs.SetOutput(stderr)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fs.Usage()
				return nil, true, nil
			}
			return nil, false, usageError{err.Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), false, nil
		}
		if len(rest) == 0 {
			return positional, false, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// chainFromStore opens the configured store and builds the chain of path.
// Bad flags and a path the store never saw are input errors (exit 2); a
// store that fails is not.
func chainFromStore(ctx context.Context, flags *configFlags, path, since, until, budget string) (plan.Chain, error) {
	elems, err := plan.ParsePath(path)
	if err != nil {
		return plan.Chain{}, usageError{"plan: --path: " + err.Error()}
	}
	w, err := parseWindow(since, until, time.Now().UTC())
	if err != nil {
		return plan.Chain{}, usageError{"plan: " + err.Error()}
	}
	q := plan.StoreQuery{Path: elems, Window: w}
	if budget != "" {
		if q.Budget, err = parseBudget(budget); err != nil {
			return plan.Chain{}, usageError{"plan: --budget: " + err.Error()}
		}
	}
	cfg, err := flags.load()
	if err != nil {
		return plan.Chain{}, err
	}
	st, err := engine.Open(ctx, cfg.Store)
	if err != nil {
		return plan.Chain{}, fmt.Errorf("open %s store: %w", cfg.Store.Engine, err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, max(cfg.Store.Timeout, time.Minute))
	defer cancel()
	c, err := plan.FromStore(ctx, st, q)
	if errors.Is(err, plan.ErrNotObserved) {
		return plan.Chain{}, usageError{"plan: " + err.Error()}
	}
	return c, err
}

// parseBudget reads "2s" or a number of milliseconds, as chain files do.
func parseBudget(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		v, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("%q is neither a duration (\"2s\") nor a number of milliseconds", s)
		}
		if !(v > 0 && v <= float64(plan.MaxDuration.Milliseconds())) {
			return 0, fmt.Errorf("%s must be > 0 and at most %s", s, plan.MaxDuration)
		}
		d = time.Duration(v * float64(time.Millisecond))
	}
	if d <= 0 || d > plan.MaxDuration {
		return 0, fmt.Errorf("%s must be > 0 and at most %s", s, plan.MaxDuration)
	}
	return d, nil
}
