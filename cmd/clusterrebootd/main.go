// Command clusterrebootd coordinates kernel and security-update reboots across
// a cluster: see README.md and DESIGN.md. main only parses the command line,
// runs the chosen command and turns its error into an exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// Set by the build (-ldflags -X).
var (
	version = "0.0.0-dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("clusterrebootd"),
		kong.Description("Coordinated, health-gated rolling reboots with an etcd lock, driven by a systemd timer."),
		kong.Exit(func(code int) { panic(exitCode(code)) }),
		kong.Vars{"version": version},
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterrebootd:", err)
		return 1
	}
	code := func() (code int) {
		defer func() {
			if r := recover(); r != nil {
				c, ok := r.(exitCode)
				if !ok {
					panic(r)
				}
				code = int(c)
			}
		}()
		kctx, err := parser.Parse(args)
		if err != nil {
			// Bad command line: bad input, exit 2 like a bad config.
			fmt.Fprintf(os.Stderr, "clusterrebootd: %s\nRun 'clusterrebootd --help' for usage.\n", clipArg(err.Error()))
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		env := newEnv(ctx, &cli.Globals)
		err = kctx.Run(env)
		return exitCodeOf(err, env)
	}()
	return code
}

// clipArg shortens a parse error: kong quotes the refused value, which may
// be arbitrarily long.
func clipArg(msg string) string {
	const max = 512
	if len(msg) <= max {
		return msg
	}
	return msg[:max] + "… (truncated)"
}

// exitCode carries kong's exit request through the panic/recover above, so
// deferred clean-ups still run and only main calls os.Exit.
type exitCode int

// exitCodeOf maps a command's error to the exit codes of DESIGN §6 and
// prints it.
func exitCodeOf(err error, env *Env) int {
	if err == nil {
		return 0
	}
	code := 1
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(env.Stderr, "clusterrebootd:", msg)
	}
	return code
}
