// Command budgetd checks whether a distributed system spends one end-to-end
// deadline: it receives OpenTelemetry traces, stores them in ClickHouse and
// finds timeout inversions, work done after the caller gave up, and retry
// blowouts. Run `budgetd --help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "budgetd:", err)
		os.Exit(exitCode(err))
	}
}
