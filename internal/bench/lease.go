package bench

import (
	"context"
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

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/sdl"
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
	// NodePrefix names the simulated nodes (default "bench-node-").
	NodePrefix string
	// Owner is the tenant of the benchmark's leases (default "akash1bench").
	Owner string
	// MemProfile, when set, is where a heap profile is written when memory is measured.
	MemProfile string
}

// DefaultLeaseReadyBench is `berth bench lease-ready` without flags.
func DefaultLeaseReadyBench() LeaseReadyBench {
	return LeaseReadyBench{Nodes: 1000, Leases: 1000, Burst: 500, Rate: 2, KubeQPS: 2000, KubeBurst: 4000, DeployConcurrency: cluster.DefaultDeployConcurrency,
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
const benchSDL = `
version: "2.0"
services:
  web:
    image: nginx:1.27
    expose:
      - port: 8080
        as: 80
        proto: tcp
        to: [{global: true}]
      - port: 9000
        proto: udp
        to: [{global: true}]
  worker:
    image: busybox:1.36
    command: ["sh", "-c"]
    args: ["sleep infinity"]
profiles:
  compute:
    web:
      resources: {cpu: {units: 0.25}, memory: {size: 128Mi}, storage: {size: 512Mi}}
    worker:
      resources: {cpu: {units: 0.5}, memory: {size: 256Mi}, storage: {size: 1Gi}}
  placement:
    dc:
      pricing:
        web: {denom: uakt, amount: 100}
        worker: {denom: uakt, amount: 100}
deployment:
  web: {dc: {profile: web, count: 2}}
  worker: {dc: {profile: worker, count: 1}}
`

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

func (r *readiness) observe(s cluster.LeaseStatus) {
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

func (r *readiness) deliver(ctx context.Context, m *cluster.Manager, id market.LeaseID, version []byte, group market.ManifestGroup) error {
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
		return nil, err
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
	cfg := app.DefaultProviderConfig()
	cfg.KubeQPS, cfg.KubeBurst, cfg.Cluster.DeployConcurrency = b.KubeQPS, b.KubeBurst, b.DeployConcurrency
	var results []Result
	emit := func(name string, v float64, unit string) error {
		r := Result{Name: name, Value: v, Unit: unit}
		results = append(results, r)
		_, err := fmt.Fprintln(out, r)
		return err
	}

	cp := b.ControlPlane
	if cp == nil {
		start := time.Now()
		if cp, err = localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{BinDir: b.BinDir, Logger: log, Throughput: true}); err != nil {
			return nil, err
		}
		defer cp.Stop()
		log.InfoContext(ctx, "control plane started", slog.Duration("took", time.Since(start)))
	}
	start := time.Now()
	specs := make([]localenv.NodeSpec, b.Nodes)
	for i := range specs {
		specs[i] = localenv.NodeSpec{Name: fmt.Sprintf("%s%04d", b.NodePrefix, i), CPU: "8", Memory: "32Gi"}
	}
	if b.ControlPlane != nil {
		// A cluster we were lent: leave it as we found it (a private one is stopped).
		defer func() {
			names := make([]string, len(specs))
			for i := range specs {
				names[i] = specs[i].Name
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := cp.DeleteNodes(dctx, names...); err != nil && retErr == nil {
				retErr = err
			}
		}()
	}
	if err := cp.AddNodes(ctx, specs...); err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "nodes ready", slog.Int("nodes", b.Nodes), slog.Duration("took", time.Since(start)))

	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = float32(b.KubeQPS), b.KubeBurst
	track := newReadiness()
	active := func(context.Context, market.LeaseID) (bool, error) { return true, nil }
	// The components report each lease at info; the benchmark's own progress is enough.
	quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
	// On a lent cluster other leases may exist: the benchmark is a provider of its own
	// and touches only its leases.
	svc, err := app.NewClusterSide(rc, cfg, benchOwner, active, track.observe, quiet)
	if err != nil {
		return nil, err
	}
	demand, err := svc.Demand(res.Groups[0])
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
	svc.Start(gctx, g, true, quiet)
	if err := svc.WaitStarted(gctx); err != nil {
		return nil, fmt.Errorf("cluster service did not start: %w", err)
	}
	baseRSS, baseHeap := memory()
	baseCPU, baseCP := cpuTime(), cp.CPUTimes()

	ids := make([]market.LeaseID, b.Leases)
	for i := range ids {
		ids[i] = market.LeaseID{Owner: b.Owner, DSeq: uint64(i + 1), GSeq: 1, OSeq: 1, Provider: benchOwner.Provider}
		// Won: the bid engine reserved the order's capacity when it bid.
		if _, err := svc.Capacity().Reserve(ids[i].Order(), demand); err != nil {
			return nil, fmt.Errorf("reserve lease %d of %d: %w (more nodes are needed)", i+1, b.Leases, err)
		}
	}
	group := res.Manifest[0]
	notReady := func(set []market.LeaseID) func() int {
		return func() int {
			n := 0
			for _, id := range set {
				if _, ok := track.ready[id]; !ok {
					n++
				}
			}
			return n
		}
	}

	// Steady arrivals: latency without a queue in front.
	steady, burst := ids[:b.Leases-b.Burst], ids[b.Leases-b.Burst:]
	if len(steady) > 0 {
		tick := time.NewTicker(time.Duration(float64(time.Second) / b.Rate))
		for _, id := range steady {
			if err := track.deliver(gctx, svc.Manager(), id, res.Version, group); err != nil {
				tick.Stop()
				return nil, err
			}
			select {
			case <-gctx.Done():
				tick.Stop()
				return nil, context.Cause(gctx)
			case <-tick.C:
			}
		}
		tick.Stop()
		if err := track.wait(gctx, "steady leases ready", b.Timeout, notReady(steady)); err != nil {
			return nil, err
		}
		lat := track.latencies(steady)
		for _, q := range []struct {
			name string
			p    float64
		}{{"lease_ready_p50", 0.50}, {"lease_ready_p99", 0.99}, {"lease_ready_max", 1}} {
			if err := emit(q.name, quantile(lat, q.p).Seconds(), "s"); err != nil {
				return nil, err
			}
		}
	}

	// A burst: every lease at once.
	if len(burst) > 0 {
		start := time.Now()
		// Tenants send at once: each manifest is answered once it is recorded.
		senders, sctx := errgroup.WithContext(gctx)
		senders.SetLimit(64)
		for _, id := range burst {
			senders.Go(func() error { return track.deliver(sctx, svc.Manager(), id, res.Version, group) })
		}
		if err := senders.Wait(); err != nil {
			return nil, err
		}
		if err := track.wait(gctx, "burst leases ready", b.Timeout, notReady(burst)); err != nil {
			return nil, err
		}
		took := time.Since(start)
		lat := track.latencies(burst)
		if err := errors.Join(
			emit(fmt.Sprintf("burst_%d_all_ready", len(burst)), took.Seconds(), "s"),
			emit("burst_ready_p50", quantile(lat, 0.5).Seconds(), "s"),
		); err != nil {
			return nil, err
		}
	}

	// Memory is a steady-state figure: measured once the cluster has stopped changing.
	if err := track.settle(gctx, 3*time.Second, b.Timeout); err != nil {
		return nil, err
	}
	rss, heap := memory()
	if b.MemProfile != "" {
		if err := writeHeapProfile(b.MemProfile); err != nil {
			return nil, err
		}
	}
	n := float64(b.Leases)
	if err := errors.Join(
		emit(fmt.Sprintf("rss_per_lease_at_%d", b.Leases), float64(rss-baseRSS)/n/1024, "KiB"),
		emit(fmt.Sprintf("heap_per_lease_at_%d", b.Leases), float64(heap-baseHeap)/n/1024, "KiB"),
		// berth's own CPU (the control plane runs in other processes): deploying and
		// watching each lease to ready.
		emit("cpu_per_lease_berth", float64(cpuTime()-baseCPU)/n/float64(time.Millisecond), "ms"),
	); err != nil {
		return nil, err
	}
	// What the same leases cost the control plane, which shares the machine.
	nowCP := cp.CPUTimes()
	for _, name := range slices.Sorted(maps.Keys(nowCP)) {
		if base, ok := baseCP[name]; ok {
			if err := emit("cpu_per_lease_"+name, float64(nowCP[name]-base)/n/float64(time.Millisecond), "ms"); err != nil {
				return nil, err
			}
		}
	}

	if b.Teardown {
		start := time.Now()
		for _, id := range ids {
			svc.Manager().LeaseClosed(id)
			svc.Capacity().Unreserve(id.Order())
		}
		if err := track.wait(gctx, "leases torn down", b.Timeout, func() int { return len(ids) - len(track.gone) }); err != nil {
			return nil, err
		}
		// The workloads are gone; the manager's last step, the namespace's deletion,
		// must have been accepted too. It reports nothing on the way: ask it.
		if err := waitTornDown(gctx, svc.Manager(), b.Timeout); err != nil {
			return nil, err
		}
		if err := emit(fmt.Sprintf("teardown_%d", b.Leases), time.Since(start).Seconds(), "s"); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// benchOwner is the provider the benchmark plays.
var benchOwner = cluster.Owner{Provider: "akash1benchprovider", ChainID: "berth-bench"}

// waitTornDown waits until the manager holds no lease, checking every 20 ms.
func waitTornDown(ctx context.Context, m *cluster.Manager, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := len(m.States())
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("leases torn down: the manager still holds %d after %s", n, timeout)
		case <-tick.C:
		}
	}
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
