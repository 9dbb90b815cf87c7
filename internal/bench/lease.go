package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/wait"
)

// LeaseReadyBench configures RunLeaseReadyBench.
type LeaseReadyBench struct {
	// Nodes is the number of simulated nodes (8 CPU, 32 GiB each).
	Nodes int
	// Leases is the number of leases deployed in all; Burst of them are delivered at
	// once after the others, which arrive at Rate per second.
	Leases, Burst int
	Rate          float64
	// KubeQPS and KubeBurst are berth's Kubernetes client rate limit.
	KubeQPS   float64
	KubeBurst int
	// DeployConcurrency is the provider's cluster.deploy_concurrency.
	DeployConcurrency int
	// Teardown closes every lease at the end and measures until their namespaces are gone.
	Teardown bool
	// Timeout bounds each phase's wait.
	Timeout time.Duration
	// ControlPlane is the cluster to use; nil starts a private one with
	// ControlPlaneOptions.Throughput (BinDir: the binaries, empty: found as tests do).
	ControlPlane *localenv.ControlPlane
	BinDir       string
	// Durable starts the private control plane as berth dev's runs: persistent, etcd
	// syncing every write to disk (in a temporary directory, removed at the end).
	Durable bool
	// NodePrefix names the simulated nodes (default "bench-node-").
	NodePrefix string
	// Owner is the tenant of the benchmark's leases (default "akash1bench").
	Owner string
	// MemProfile, when set, is where a heap profile is written when memory is measured.
	MemProfile string
}

// DefaultLeaseReadyBench is `berth bench lease-ready` without flags.
func DefaultLeaseReadyBench() LeaseReadyBench {
	return LeaseReadyBench{Nodes: 1000, Leases: 1000, Burst: 500, Rate: 2, KubeQPS: 2000, KubeBurst: 4000, DeployConcurrency: deploy.DefaultDeployConcurrency,
		Teardown: true, Timeout: 5 * time.Minute}
}

// Result is one measured figure, printed as `name value unit`.
type Result struct {
	Name  string
	Value float64
	Unit  string
}

func (r Result) String() string {
	return r.Name + " " + strconv.FormatFloat(r.Value, 'f', 3, 64) + " " + r.Unit
}

// Validate names the first setting out of range.
func (b LeaseReadyBench) Validate() error {
	switch {
	case b.Nodes < 1:
		return fmt.Errorf("nodes: %d; at least 1", b.Nodes)
	case b.Leases < 1:
		return fmt.Errorf("leases: %d; at least 1", b.Leases)
	case b.Burst < 0 || b.Burst > b.Leases:
		return fmt.Errorf("burst: %d is outside 0–%d (the leases)", b.Burst, b.Leases)
	case b.Burst < b.Leases && b.Rate <= 0:
		return fmt.Errorf("rate: %g; the %d leases before the burst need a positive rate", b.Rate, b.Leases-b.Burst)
	case b.DeployConcurrency < 1:
		return fmt.Errorf("deploy-concurrency: %d; at least 1", b.DeployConcurrency)
	case b.KubeQPS <= 0 || b.KubeBurst < 1:
		return fmt.Errorf("kube-qps %g and kube-burst %d must be positive", b.KubeQPS, b.KubeBurst)
	case b.Timeout <= 0:
		return fmt.Errorf("timeout: %s; must be positive", b.Timeout)
	}
	return nil
}

// benchSDL is each lease of the benchmark: a web service of two replicas with a global
// port, and a worker; three pods, two Deployments, a ClusterIP and a NodePort service.
//
//go:embed bench.sdl.yaml
var benchSDL string

// readiness records when each lease was delivered and when the provider's monitor
// first saw it ready, or gone.
type readiness struct {
	mu      sync.Mutex
	sent    map[market.LeaseID]time.Time
	ready   map[market.LeaseID]time.Time
	gone    map[market.LeaseID]bool
	last    time.Time     // of the last status change
	changed chan struct{} // a wake-up, never blocks the informers
}

func newReadiness() *readiness {
	return &readiness{sent: map[market.LeaseID]time.Time{}, ready: map[market.LeaseID]time.Time{},
		gone: map[market.LeaseID]bool{}, changed: make(chan struct{}, 1)}
}

func (r *readiness) observe(s deploy.LeaseStatus) {
	now := time.Now()
	r.mu.Lock()
	r.last = now
	if _, ok := r.sent[s.Lease]; ok {
		if len(s.Services) == 0 {
			r.gone[s.Lease] = true
		} else if _, done := r.ready[s.Lease]; s.Ready && !done {
			r.ready[s.Lease] = now
		}
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *readiness) deliver(ctx context.Context, m *deploy.Manager, id market.LeaseID, version []byte, group market.ManifestGroup) error {
	r.mu.Lock()
	r.sent[id] = time.Now()
	r.mu.Unlock()
	if err := m.ManifestReceived(ctx, id, version, group); err != nil {
		return fmt.Errorf("deliver the manifest: %w", err)
	}
	return nil
}

// wait blocks until done(ids) reports none missing, ctx ends or timeout passes.
func (r *readiness) wait(ctx context.Context, what string, timeout time.Duration, missing func() int) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		n := missing()
		r.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("%s: %d leases still waiting after %s", what, n, timeout)
		case <-r.changed:
		}
	}
}

// settle waits until no lease status has changed for quiet: the controllers and kwok
// have finished reacting, and the informers' queues are drained.
func (r *readiness) settle(ctx context.Context, quiet, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		since := time.Since(r.last)
		r.mu.Unlock()
		if since >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lease statuses still changing after %s", timeout)
		}
		t := time.NewTimer(quiet - since)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// latencies returns each lease's time from delivery to ready, sorted.
func (r *readiness) latencies(ids []market.LeaseID) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		out = append(out, r.ready[id].Sub(r.sent[id]))
	}
	slices.Sort(out)
	return out
}

// RunLeaseReadyBench measures how fast the provider's cluster service brings leases to
// ready on a simulated cluster: the inventory, deployer, deployment manager and monitor
// are the provider's own (built as `provider run` builds them), leases are reserved in
// the inventory as won bids are, and their manifests handed to the manager as the
// gateway does. The ledger is not in the loop (its path is measured by the bid engine
// benchmarks). Each result is also written to out as it is measured.
func RunLeaseReadyBench(ctx context.Context, b LeaseReadyBench, out io.Writer, log *slog.Logger) (_ []Result, retErr error) {
	if err := b.Validate(); err != nil {
		return nil, config.Invalid(err)
	}
	if b.NodePrefix == "" {
		b.NodePrefix = "bench-node-"
	}
	if b.Owner == "" {
		b.Owner = "akash1bench"
	}
	res, _, err := sdl.Parse([]byte(benchSDL), sdl.Options{})
	if err != nil {
		return nil, fmt.Errorf("benchmark SDL: %w", err)
	}
	r := &leaseBench{b: b, out: out, res: res, group: res.Manifest[0], track: newReadiness()}
	cpStart := time.Now()
	cp, cleanup, err := benchCluster(ctx, b, log)
	if err != nil {
		return nil, err
	}
	if b.ControlPlane == nil {
		if err := r.emit("control_plane_and_nodes_start", time.Since(cpStart).Seconds(), "s"); err != nil {
			_ = cleanup()
			return nil, err
		}
	}
	defer func() {
		if err := cleanup(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	cfg := config.DefaultProviderConfig()
	cfg.KubeQPS, cfg.KubeBurst, cfg.Cluster.DeployConcurrency = b.KubeQPS, b.KubeBurst, b.DeployConcurrency
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = float32(b.KubeQPS), b.KubeBurst
	active := func(context.Context, market.LeaseID) (bool, error) { return true, nil }
	// The components report each lease at info; the benchmark's own progress is enough.
	quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
	// On a lent cluster other leases may exist: the benchmark is a provider of its own
	// and touches only its leases.
	if r.svc, err = app.NewClusterSide(rc, cfg, benchOwner, active, r.track.observe, quiet); err != nil {
		return nil, err
	}
	demand, err := r.svc.Demand(res.Groups[0])
	if err != nil {
		return nil, fmt.Errorf("benchmark SDL: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	defer func() {
		stop()
		if err := g.Wait(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	r.svc.Start(gctx, g, true, quiet)
	if err := r.svc.WaitStarted(gctx); err != nil {
		return nil, fmt.Errorf("cluster service did not start: %w", err)
	}
	baseRSS, baseHeap := memory()
	baseCPU, baseCP := cpuTime(), cp.CPUTimes()

	r.ids = make([]market.LeaseID, b.Leases)
	for i := range r.ids {
		r.ids[i] = market.LeaseID{Owner: b.Owner, DSeq: uint64(i + 1), GSeq: 1, OSeq: 1, Provider: benchOwner.Provider}
		// Won: the bid engine reserved the order's capacity when it bid.
		if _, err := r.svc.Capacity().Reserve(r.ids[i].Order(), demand); err != nil {
			return nil, fmt.Errorf("reserve lease %d of %d: %w (more nodes are needed)", i+1, b.Leases, err)
		}
	}
	steady, burst := r.ids[:b.Leases-b.Burst], r.ids[b.Leases-b.Burst:]
	if err := r.steady(gctx, steady); err != nil {
		return nil, err
	}
	if err := r.burst(gctx, burst); err != nil {
		return nil, err
	}
	if err := r.cost(gctx, cp, baseRSS, baseHeap, baseCPU, baseCP); err != nil {
		return nil, err
	}
	if b.Teardown {
		if err := r.teardown(gctx); err != nil {
			return nil, err
		}
	}
	return r.results, nil
}

// benchCluster is the cluster the benchmark runs on with its simulated nodes: a
// private control plane (stopped by cleanup), or the one lent in b, left as it was
// found (cleanup deletes the nodes added).
func benchCluster(ctx context.Context, b LeaseReadyBench, log *slog.Logger) (*localenv.ControlPlane, func() error, error) {
	var cleanup func() error
	cp := b.ControlPlane
	specs := make([]localenv.NodeSpec, b.Nodes)
	for i := range specs {
		specs[i] = localenv.NodeSpec{Name: fmt.Sprintf("%s%04d", b.NodePrefix, i), CPU: "8", Memory: "32Gi"}
	}
	if cp == nil {
		start := time.Now()
		var err error
		opts := localenv.ControlPlaneOptions{BinDir: b.BinDir, Logger: log, Throughput: true, Persistent: b.Durable}
		if b.Durable {
			if opts.Dir, err = os.MkdirTemp("", "berth-bench-cluster-"); err != nil {
				return nil, nil, err
			}
		}
		removeDir := func() error {
			if opts.Dir == "" {
				return nil
			}
			return os.RemoveAll(opts.Dir)
		}
		if cp, err = localenv.StartControlPlane(ctx, opts); err != nil {
			return nil, nil, errors.Join(err, removeDir())
		}
		cleanup = func() error { cp.Stop(); return removeDir() }
		log.InfoContext(ctx, "control plane started", slog.Duration("took", time.Since(start)))
	} else {
		cleanup = func() error {
			names := make([]string, len(specs))
			for i := range specs {
				names[i] = specs[i].Name
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return cp.DeleteNodes(dctx, names...)
		}
	}
	start := time.Now()
	if err := cp.AddNodes(ctx, specs...); err != nil {
		return nil, nil, errors.Join(err, cleanup())
	}
	log.InfoContext(ctx, "nodes ready", slog.Int("nodes", b.Nodes), slog.Duration("took", time.Since(start)))
	return cp, cleanup, nil
}

// leaseBench is one run of the lease-ready benchmark.
type leaseBench struct {
	b       LeaseReadyBench
	out     io.Writer
	res     *sdl.Result
	group   market.ManifestGroup
	track   *readiness
	svc     *app.ClusterSide
	ids     []market.LeaseID
	results []Result
}

// emit prints one figure and keeps it.
func (r *leaseBench) emit(name string, v float64, unit string) error {
	res := Result{Name: name, Value: v, Unit: unit}
	r.results = append(r.results, res)
	_, err := fmt.Fprintln(r.out, res)
	return err
}

// notReady counts the leases of set not ready yet.
func (r *leaseBench) notReady(set []market.LeaseID) func() int {
	return func() int {
		n := 0
		for _, id := range set {
			if _, ok := r.track.ready[id]; !ok {
				n++
			}
		}
		return n
	}
}

// steady delivers the leases' manifests at the configured rate (latency without a
// queue in front) and reports their time to ready.
func (r *leaseBench) steady(ctx context.Context, leases []market.LeaseID) error {
	if len(leases) == 0 {
		return nil
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.b.Rate))
	defer tick.Stop()
	for _, id := range leases {
		if err := r.track.deliver(ctx, r.svc.Manager(), id, r.res.Version, r.group); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
	if err := r.track.wait(ctx, "steady leases ready", r.b.Timeout, r.notReady(leases)); err != nil {
		return err
	}
	lat := r.track.latencies(leases)
	for _, q := range []struct {
		name string
		p    float64
	}{{"lease_ready_p50", 0.50}, {"lease_ready_p99", 0.99}, {"lease_ready_max", 1}} {
		if err := r.emit(q.name, quantile(lat, q.p).Seconds(), "s"); err != nil {
			return err
		}
	}
	return nil
}

// burst delivers every lease's manifest at once, as tenants sending together (each
// answered once recorded), and reports the time until all are ready.
func (r *leaseBench) burst(ctx context.Context, leases []market.LeaseID) error {
	if len(leases) == 0 {
		return nil
	}
	start := time.Now()
	senders, sctx := errgroup.WithContext(ctx)
	senders.SetLimit(64)
	for _, id := range leases {
		senders.Go(func() error { return r.track.deliver(sctx, r.svc.Manager(), id, r.res.Version, r.group) })
	}
	if err := senders.Wait(); err != nil {
		return err
	}
	if err := r.track.wait(ctx, "burst leases ready", r.b.Timeout, r.notReady(leases)); err != nil {
		return err
	}
	took := time.Since(start)
	lat := r.track.latencies(leases)
	return errors.Join(
		r.emit(fmt.Sprintf("burst_%d_all_ready", len(leases)), took.Seconds(), "s"),
		r.emit("burst_ready_p50", quantile(lat, 0.5).Seconds(), "s"),
	)
}

// cost reports memory and CPU per lease, once the cluster has stopped changing:
// berth's own, then the control plane's (other processes on the same machine).
func (r *leaseBench) cost(ctx context.Context, cp *localenv.ControlPlane, baseRSS, baseHeap int64, baseCPU time.Duration, baseCP map[string]time.Duration) error {
	if err := r.track.settle(ctx, 3*time.Second, r.b.Timeout); err != nil {
		return err
	}
	rss, heap := memory()
	if r.b.MemProfile != "" {
		if err := writeHeapProfile(r.b.MemProfile); err != nil {
			return err
		}
	}
	n := float64(r.b.Leases)
	if err := errors.Join(
		r.emit(fmt.Sprintf("rss_per_lease_at_%d", r.b.Leases), float64(rss-baseRSS)/n/1024, "KiB"),
		r.emit(fmt.Sprintf("heap_per_lease_at_%d", r.b.Leases), float64(heap-baseHeap)/n/1024, "KiB"),
		// berth's own CPU (the control plane runs in other processes): deploying and
		// watching each lease to ready.
		r.emit("cpu_per_lease_berth", float64(cpuTime()-baseCPU)/n/float64(time.Millisecond), "ms"),
	); err != nil {
		return err
	}
	nowCP := cp.CPUTimes()
	for _, name := range slices.Sorted(maps.Keys(nowCP)) {
		if base, ok := baseCP[name]; ok {
			if err := r.emit("cpu_per_lease_"+name, float64(nowCP[name]-base)/n/float64(time.Millisecond), "ms"); err != nil {
				return err
			}
		}
	}
	return nil
}

// teardown closes every lease and reports the time until the manager has deleted
// their namespaces.
func (r *leaseBench) teardown(ctx context.Context) error {
	start := time.Now()
	for _, id := range r.ids {
		r.svc.Manager().LeaseClosed(id)
		r.svc.Capacity().Unreserve(id.Order())
	}
	if err := r.track.wait(ctx, "leases torn down", r.b.Timeout, func() int { return len(r.ids) - len(r.track.gone) }); err != nil {
		return err
	}
	// The workloads are gone; the manager's last step, the namespace's deletion,
	// must have been accepted too. It reports nothing on the way: ask it.
	if err := waitTornDown(ctx, r.svc.Manager(), r.b.Timeout); err != nil {
		return err
	}
	return r.emit(fmt.Sprintf("teardown_%d", r.b.Leases), time.Since(start).Seconds(), "s")
}

// benchOwner is the provider the benchmark plays.
var benchOwner = ownership.Owner{Provider: "akash1benchprovider", ChainID: "berth-bench"}

// waitTornDown waits until the manager holds no lease, checking every 20 ms.
func waitTornDown(ctx context.Context, m *deploy.Manager, timeout time.Duration) error {
	err := wait.Within(ctx, timeout, 20*time.Millisecond, func(context.Context) error {
		if n := len(m.States()); n > 0 {
			return fmt.Errorf("the manager still holds %d", n)
		}
		return nil
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("leases torn down: %w after %s", err, timeout)
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memory returns the process's resident set and the Go heap in use, in bytes, after a
// collection that returns freed memory to the system.
func memory() (rss, heap int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = int64(ms.HeapInuse) //nolint:gosec // a heap size fits an int64
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, heap
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, heap
		}
	}
	return 0, heap
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("memprofile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	return nil
}

// minLevel drops records below level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
