package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"berth.dev/berth/internal/wait"
)

// Config tunes a chaos run. Zero values take the defaults (DefaultConfig).
type Config struct {
	// Berth is the berth binary the providers run as (`berth provider run`).
	Berth string
	// KubeBinaries is the control plane's binaries (empty: localenv.FindBinaries).
	KubeBinaries string
	// Dir holds the run's state and the providers' logs (empty: a temporary
	// directory, removed after a run without violations).
	Dir string
	// Lifecycles is how many tenant deployments go through their whole life; they
	// run Concurrency at a time, a round per batch.
	Lifecycles, Concurrency int
	// Seed drives every random choice (which provider, which signal, when); 0 picks
	// one (reported, so a failing run can be repeated).
	Seed uint64
	// KillPause is the longest pause between two provider kills (they are spread
	// uniformly up to it); 0 kills nothing.
	KillPause time.Duration
	// APIOutage and LedgerDown are how long the API server and the ledger node are
	// down, every fifth round (from the second and the third: in the last round of a
	// shorter run); 0 skips the fault.
	APIOutage, LedgerDown time.Duration
	// Nodes is the number of simulated nodes.
	Nodes int
	// BlockInterval is the ledger's block time.
	BlockInterval time.Duration
	// ManifestTimeout is the providers' no-manifest watchdog (short, so that a lost
	// manifest closes its lease within the run, which the suite reports).
	ManifestTimeout time.Duration
	// StepTimeout bounds each step of a lifecycle; BidTimeout the wait for a bid;
	// StartTimeout a provider's start; Converge the time the invariants have to hold
	// again after a round's last fault.
	StepTimeout, BidTimeout, StartTimeout, Converge time.Duration
	// Out receives progress lines and the report.
	Out io.Writer
}

// DefaultConfig is the short run `make test` makes: 6 lifecycles, 3 at a time.
func DefaultConfig() Config {
	return Config{
		Lifecycles: 6, Concurrency: 3, KillPause: 4 * time.Second, APIOutage: 5 * time.Second, LedgerDown: 2 * time.Second,
		Nodes: 2, BlockInterval: 250 * time.Millisecond, ManifestTimeout: 45 * time.Second,
		StepTimeout: 2 * time.Minute, BidTimeout: 90 * time.Second, StartTimeout: 90 * time.Second, Converge: 30 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.Lifecycles == 0 {
		c.Lifecycles = d.Lifecycles
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	setDur(&c.BlockInterval, d.BlockInterval)
	setDur(&c.ManifestTimeout, d.ManifestTimeout)
	setDur(&c.StepTimeout, d.StepTimeout)
	setDur(&c.BidTimeout, d.BidTimeout)
	setDur(&c.StartTimeout, d.StartTimeout)
	setDur(&c.Converge, d.Converge)
	if c.Out == nil {
		c.Out = io.Discard
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Berth == "":
		return errors.New("chaos: the berth binary is required")
	case c.Lifecycles < 1 || c.Concurrency < 1:
		return fmt.Errorf("chaos: lifecycles %d and concurrency %d must be at least 1", c.Lifecycles, c.Concurrency)
	case c.KillPause < 0 || c.APIOutage < 0 || c.LedgerDown < 0:
		return errors.New("chaos: fault durations may not be negative")
	}
	if _, err := os.Stat(c.Berth); err != nil {
		return fmt.Errorf("chaos: berth binary: %w", err)
	}
	return nil
}

// Report is what a run did and found.
type Report struct {
	Seed                   uint64
	Lifecycles, Failed     int
	Rounds                 int
	ManifestsAcked         int
	Kills                  map[string]int // "a SIGKILL": count
	APIOutages, LedgerDown int
	// MaxConverge is the longest a round took, after its last fault, for every
	// invariant to hold again.
	MaxConverge time.Duration
	// MaxTermStop is the longest a provider took to exit on SIGTERM.
	MaxTermStop time.Duration
	// Lifecycle times.
	LifecycleP50, LifecycleMax time.Duration
	Duration                   time.Duration
	// Violations are broken promises; Errors lifecycles that failed otherwise;
	// ClusterStalls versions berth applied that the cluster did not roll out in time
	// (listed, not failures: see stallError).
	Violations, Errors, ClusterStalls []string
}

// violation is a broken promise.
type violation struct {
	kind, detail string
}

func (v *violation) Error() string { return v.kind + ": " + v.detail }

// Run runs the suite and reports; the error is non-nil when a promise was broken or a
// lifecycle failed (the report says which, with the seed).
func Run(ctx context.Context, cfg Config, log *slog.Logger) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() //nolint:gosec // G404: a seed to repeat the run with, not a secret
	}
	rep := Report{Seed: cfg.Seed, Kills: map[string]int{}}
	start := time.Now()
	temp := cfg.Dir == ""
	if temp {
		dir, err := os.MkdirTemp("", "berth-chaos-")
		if err != nil {
			return rep, err
		}
		cfg.Dir = dir
	}
	progress(cfg.Out, "chaos: seed %d, %d lifecycles %d at a time, state in %s", cfg.Seed, cfg.Lifecycles, cfg.Concurrency, cfg.Dir)
	w, err := startWorld(ctx, cfg, log)
	if err != nil {
		return rep, fmt.Errorf("chaos (seed %d): %w", cfg.Seed, err)
	}
	progress(cfg.Out, "chaos: ledger, cluster and providers a and b ready (%s)", time.Since(start).Round(time.Millisecond))
	var times []time.Duration
	for next := 0; next < cfg.Lifecycles && ctx.Err() == nil; rep.Rounds++ {
		n := min(cfg.Concurrency, cfg.Lifecycles-next)
		batch := make([]*lifecycle, n)
		for i := range batch {
			k := next + i
			batch[i] = &lifecycle{n: k, dseq: uint64(1000 + k), provider: w.providers[providerNames[k%len(providerNames)]]}
		}
		next += n
		t, err := w.round(ctx, cfg, &rep, batch)
		times = append(times, t...)
		if err != nil {
			w.stop()
			return rep, fmt.Errorf("chaos (seed %d): %w", cfg.Seed, err)
		}
	}
	w.stop()
	slices.Sort(times)
	if len(times) > 0 {
		rep.LifecycleP50, rep.LifecycleMax = times[len(times)/2], times[len(times)-1]
	}
	rep.Duration = time.Since(start)
	writeReport(cfg.Out, &rep)
	for _, s := range rep.ClusterStalls {
		progress(cfg.Out, "chaos: cluster stall (not berth's): %s", s)
	}
	if len(rep.Violations) > 0 || len(rep.Errors) > 0 {
		return rep, fmt.Errorf("chaos (seed %d): %d broken promise(s), %d failed lifecycle(s); state and provider logs in %s:\n  %s",
			cfg.Seed, len(rep.Violations), len(rep.Errors), cfg.Dir, strings.Join(append(slices.Clone(rep.Violations), rep.Errors...), "\n  "))
	}
	if temp {
		_ = os.RemoveAll(cfg.Dir)
	}
	return rep, ctx.Err()
}

// round runs a batch of lifecycles while faults are injected, then checks the
// invariants. It returns the lifecycles' times; an error only when the run cannot go
// on (a provider that does not come back).
func (w *world) round(ctx context.Context, cfg Config, rep *Report, batch []*lifecycle) ([]time.Duration, error) {
	progress(cfg.Out, "chaos: round %d: lifecycles %d–%d", rep.Rounds+1, batch[0].n+1, batch[len(batch)-1].n+1)
	fctx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	var faultErr error
	flog := faultLog{kills: map[string]int{}}
	faults.Go(func() { faultErr = w.injectFaults(fctx, cfg, rep.Rounds, &flog) })
	var mu sync.Mutex
	var times []time.Duration
	var lifes sync.WaitGroup
	for _, l := range batch {
		lifes.Go(func() {
			err := w.runLifecycle(ctx, l)
			mu.Lock()
			defer mu.Unlock()
			rep.ManifestsAcked += l.acks
			var v *violation
			var stall *stallError
			switch {
			case errors.As(err, &stall):
				rep.ClusterStalls = append(rep.ClusterStalls, fmt.Sprintf("lifecycle %d (%s): %v", l.n+1, l.provider.name, err))
			case errors.As(err, &v):
				rep.Violations = append(rep.Violations, fmt.Sprintf("lifecycle %d (%s): %v", l.n+1, l.provider.name, err))
				rep.Failed++
			case err != nil:
				rep.Errors = append(rep.Errors, fmt.Sprintf("lifecycle %d (%s): %v", l.n+1, l.provider.name, err))
				rep.Failed++
			default:
				times = append(times, l.took)
			}
			rep.Lifecycles++
		})
	}
	lifes.Wait()
	stopFaults()
	faults.Wait()
	for k, n := range flog.kills {
		rep.Kills[k] += n
	}
	rep.APIOutages += flog.apiOutages
	rep.LedgerDown += flog.ledgerRestarts
	rep.MaxTermStop = max(rep.MaxTermStop, flog.maxTermStop)
	rep.Violations = append(rep.Violations, flog.violations...)
	if faultErr != nil {
		return times, faultErr
	}
	// Every provider runs again (injectFaults restarts the one it killed last before
	// it returns): the invariants must hold within cfg.Converge.
	took, problems := w.converge(ctx, cfg)
	rep.MaxConverge = max(rep.MaxConverge, took)
	rep.Violations = append(rep.Violations, problems...)
	progress(cfg.Out, "chaos: round %d done: %d lifecycle(s) failed so far; the invariants held %s after its last fault",
		rep.Rounds+1, rep.Failed, took.Round(time.Millisecond))
	return times, nil
}

// faultLog is what one round's faults did.
type faultLog struct {
	kills                      map[string]int
	apiOutages, ledgerRestarts int
	maxTermStop                time.Duration
	violations                 []string
}

// injectFaults kills and restarts providers at random moments until ctx ends and, in
// its own goroutine, takes the API server down and restarts the ledger node once each
// in the run. It returns with every provider and the ledger running, or the error of
// one that did not come back. Each goroutine has its own random source from the seed
// and the round, so a run can be repeated.
func (w *world) injectFaults(ctx context.Context, cfg Config, round int, rep *faultLog) error {
	var g errgroup.Group
	var mu sync.Mutex // guards rep
	lastRound := (cfg.Lifecycles+cfg.Concurrency-1)/cfg.Concurrency - 1
	// The outages happen whatever the lifecycles' pace: ctx (the round's faults) does
	// not cut them short.
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(3*round))) //nolint:gosec // G404: reproducible chaos, not secrets
	apiAt, ledgerAt, ledgerKill := time.Duration(rng.Int64N(int64(3*time.Second))), time.Duration(rng.Int64N(int64(5*time.Second))), rng.IntN(2) == 0
	// The API server goes down in rounds 2, 7, 12…, the ledger node in rounds 3, 8,
	// 13… (in the last round when there are fewer).
	if cfg.APIOutage > 0 && (round%5 == 1 || round == lastRound && lastRound < 1) {
		g.Go(func() error {
			wait.Sleep(context.WithoutCancel(ctx), apiAt)
			progress(cfg.Out, "chaos: the API server goes down for %s", cfg.APIOutage)
			if err := w.cp.RestartAPIServer(context.WithoutCancel(ctx), cfg.APIOutage); err != nil {
				return fmt.Errorf("API server outage: %w", err)
			}
			mu.Lock()
			rep.apiOutages++
			mu.Unlock()
			return nil
		})
	}
	if cfg.LedgerDown > 0 && (round%5 == 2 || round == lastRound && lastRound < 2) {
		g.Go(func() error {
			wait.Sleep(context.WithoutCancel(ctx), ledgerAt)
			progress(cfg.Out, "chaos: the ledger node stops (%s) for %s", map[bool]string{true: "SIGKILL", false: "SIGTERM"}[ledgerKill], cfg.LedgerDown)
			if err := w.restartLedger(ctx, cfg.LedgerDown, ledgerKill); err != nil {
				return fmt.Errorf("ledger restart: %w", err)
			}
			mu.Lock()
			rep.ledgerRestarts++
			mu.Unlock()
			return nil
		})
	}
	g.Go(func() error {
		if cfg.KillPause <= 0 {
			return nil
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(3*round+1))) //nolint:gosec // G404: reproducible chaos, not secrets
		for first := true; ; first = false {
			pause := time.Duration(rng.Int64N(int64(cfg.KillPause))) + 200*time.Millisecond
			if first {
				// A round's lifecycles take a few seconds: its first kill comes within
				// one, so that every round kills while lifecycles run (a pause drawn
				// longer than the round would leave it without any).
				pause = min(pause, time.Second)
			}
			if !wait.Sleep(ctx, pause) {
				return nil
			}
			// Provider a is the one mostly killed; b, now and then, too.
			name := providerNames[0]
			if rng.IntN(5) == 0 {
				name = providerNames[1]
			}
			sig := syscall.SIGKILL
			if rng.IntN(5) < 2 {
				sig = syscall.SIGTERM
			}
			p := w.providers[name]
			stopped, err := p.signal(sig, time.Minute)
			mu.Lock()
			rep.kills[name+" "+sigName(sig)]++
			if sig == syscall.SIGTERM {
				rep.maxTermStop = max(rep.maxTermStop, stopped)
			}
			if err != nil {
				rep.violations = append(rep.violations, err.Error())
			}
			mu.Unlock()
			// Down for a moment, sometimes none.
			wait.Sleep(context.WithoutCancel(ctx), time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
			if err := p.start(w.run); err != nil {
				return err
			}
			if err := p.waitReady(context.WithoutCancel(ctx), cfg.StartTimeout); err != nil {
				return err
			}
		}
	})
	return g.Wait()
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGKILL"
}

func progress(w io.Writer, format string, a ...any) {
	_, _ = fmt.Fprintf(w, format+"\n", a...)
}

// writeReport prints the figures as `name value unit` lines, as berth's other
// benchmarks do.
func writeReport(w io.Writer, r *Report) {
	lines := []struct {
		name  string
		value any
		unit  string
	}{
		{"seed", r.Seed, ""},
		{"lifecycles", r.Lifecycles, ""},
		{"lifecycles_failed", r.Failed, ""},
		{"rounds", r.Rounds, ""},
		{"manifests_answered_200", r.ManifestsAcked, ""},
	}
	for _, k := range slices.Sorted(maps.Keys(r.Kills)) {
		lines = append(lines, struct {
			name  string
			value any
			unit  string
		}{"kills_" + strings.ReplaceAll(strings.ToLower(k), " ", "_"), r.Kills[k], ""})
	}
	lines = append(lines, []struct {
		name  string
		value any
		unit  string
	}{
		{"api_server_outages", r.APIOutages, ""},
		{"ledger_restarts", r.LedgerDown, ""},
		{"broken_promises", len(r.Violations), ""},
		{"cluster_stalls", len(r.ClusterStalls), ""},
		{"converge_max", r.MaxConverge.Seconds(), "s"},
		{"sigterm_stop_max", r.MaxTermStop.Seconds(), "s"},
		{"lifecycle_p50", r.LifecycleP50.Seconds(), "s"},
		{"lifecycle_max", r.LifecycleMax.Seconds(), "s"},
		{"duration", r.Duration.Seconds(), "s"},
	}...)
	for _, l := range lines {
		switch v := l.value.(type) {
		case float64:
			_, _ = fmt.Fprintf(w, "%s %.3f %s\n", l.name, v, l.unit)
		default:
			_, _ = fmt.Fprintf(w, "%s %v %s\n", l.name, v, l.unit)
		}
	}
}
