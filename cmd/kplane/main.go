// Command kplane is a Kubernetes-compatible control plane in one binary.
//
// `kplane serve` serves the Kubernetes API; `kplane kv` is a small etcdctl
// for kplane's store.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `kplane: a Kubernetes-compatible control plane in one binary.

Usage:
  kplane serve [flags]                 serve the Kubernetes API (kubectl, client-go, controller-runtime)
  kplane kv [flags] <command> [args]   read and write kplane's key-value store
  kplane version                       print the version

Run 'kplane kv -h' for the store commands.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal the next one ends the process at once
		// (the store survives that as it survives kill -9), as a second
		// signal ends kube-apiserver: during --shutdown-delay-duration,
		// say, or a shutdown that waits on a stuck request.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "kv":
		return runKV(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "kplane %s\n", version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "kplane: unknown command %q\n\n%s", args[0], usage)
	return 2
}
