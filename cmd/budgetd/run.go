package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// usageError is an error in the command line itself; it exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode maps an error from run to the process exit status.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

const usage = `budgetd checks whether your services spend one end-to-end deadline.

Usage:
  budgetd <command> [flags]

Commands:
  serve     receive OTLP traces, store them and find budget violations
  analyze   run the detectors over trace files or stored spans
  plan      check a planned chain of timeouts and retries against its budget
  sim       run a chain of real services on loopback and export their spans over OTLP
  version   print the version

Run 'budgetd <command> --help' for a command's flags.
`

// run is budgetd's whole program: it parses args, runs one command and
// returns its error. Only main exits.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "analyze":
		return analyzeCmd(ctx, rest, stdout, stderr)
	case "plan":
		return planCmd(ctx, rest, stdout, stderr)
	case "sim":
		return simCmd(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "budgetd", version())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}

// parseFlags parses a command's flags; --help prints them and succeeds.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (help bool, err error) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return true, nil
		}
		return false, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return false, usageError{fmt.Sprintf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))}
	}
	return false, nil
}
