// Command berth is the berth compute provider: one binary whose subcommands run the
// provider, its operators, the marketplace ledger, the local development environment
// and the tenant tools. main only wires flags to internal/app (and to internal/dev and
// internal/bench, built from it).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"berth.dev/berth/internal/config"
)

// Command groups, in the order `berth --help` lists them.
const (
	groupRun   = "run"
	groupTools = "tools"
)

// exitError carries the exit code of a command's failure: 1 when the command ran and
// failed, 2 for usage errors, a remote command's own exit code for `lease shell`.
// Errors cobra returns itself (unknown command or flag, wrong arguments) are usage
// errors too.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// runE adapts a command body so that its failures exit 1, unless it returned a
// usageError or a configuration was refused (config.Error): those exit 2.
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var ee *exitError
		var ce *config.Error
		switch {
		case err == nil || errors.As(err, &ee):
			return err
		case errors.As(err, &ce):
			return &exitError{code: 2, err: err}
		}
		return &exitError{code: 1, err: err}
	}
}

func newRootCommand(log *slog.Logger) *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "berth — a compute provider for a decentralized cloud marketplace",
		Long: "berth runs tenants' workloads on a Kubernetes cluster for a decentralized cloud\n" +
			"marketplace: it bids on deployment orders, runs leases, and serves tenants.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddGroup(
		&cobra.Group{ID: groupRun, Title: "Run:"},
		&cobra.Group{ID: groupTools, Title: "Tools:"},
	)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%w", err) })
	root.AddCommand(
		newDevCommand(log),
		newChainCommand(log),
		newSDLCommand(),
		newKeysCommand(),
		newBankCommand(),
		newTenantCommand(),
		newProviderCommand(),
		newOperatorCommand(),
		newBusCommand(),
		newBenchCommand(log),
		newVersionCommand(),
	)
	root.SetHelpCommandGroupID(groupTools)
	root.SetCompletionCommandGroupID(groupTools)
	return root
}

// routeKlog sends what the Kubernetes libraries log through klog (client-go's
// reflectors, leader election) to log, in berth's format and at its level, instead of
// klog's own lines on stderr. klog is configured once per process (it may not be while
// it logs): to a handler that forwards to the logger of the command that last called
// routeKlog.
func routeKlog(log *slog.Logger) {
	klogTarget.Store(log)
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(klogHandler{})) })
}

var (
	klogOnce   sync.Once
	klogTarget atomic.Pointer[slog.Logger]
)

// klogHandler is klog's slog handler: klogTarget's, with the attributes and groups
// klog's loggers added (wrap, applied in order when a record is handled).
type klogHandler struct {
	wrap []func(slog.Handler) slog.Handler
}

func (h klogHandler) target() slog.Handler {
	t := klogTarget.Load().Handler()
	for _, w := range h.wrap {
		t = w(t)
	}
	return t
}

func (h klogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return klogTarget.Load().Handler().Enabled(ctx, l)
}

func (h klogHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h klogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return klogHandler{wrap: append(slices.Clip(h.wrap), func(t slog.Handler) slog.Handler { return t.WithAttrs(as) })}
}

func (h klogHandler) WithGroup(name string) slog.Handler {
	return klogHandler{wrap: append(slices.Clip(h.wrap), func(t slog.Handler) slog.Handler { return t.WithGroup(name) })}
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, let a second one end the process at once, should
		// shutting down hang.
		<-ctx.Done()
		stop()
	}()
	err := newRootCommand(log).ExecuteContext(ctx)
	stop()
	if code := exitStatus(os.Stderr, err); code != 0 {
		os.Exit(code)
	}
}

// exitStatus says why a command failed on w and returns the exit code it calls for (0
// for no error; never 0 for one).
func exitStatus(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	_, _ = fmt.Fprintf(w, "berth: %v\n", err)
	var ee *exitError
	switch {
	case !errors.As(err, &ee):
		return 2
	case ee.code < 1 || ee.code > 255:
		return 1 // an exit status is a byte: 256 would read as success
	}
	return ee.code
}

// selfName is how to name berth in the commands it suggests: as it was started (say
// ./bin/berth), else "berth".
func selfName() string {
	if a := os.Args[0]; filepath.Base(a) == "berth" {
		return a
	}
	return "berth"
}
