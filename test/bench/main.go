// Command bench measures Steward on the local test bed (internal/testbed) next to etcd processes doing the same
// by hand, and writes the results into docs/development/benchmarks.md (make bench). The prose of each section is
// Markdown in sections.md.tmpl; the bench fills in the numbers.
//
//	go run ./test/bench [-only upgrade,...] [-cold] [-runs 5]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := bench(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}
