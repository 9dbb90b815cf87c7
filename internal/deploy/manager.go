package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/wait"
)

// Deployed is a lease the cluster runs, as its Manifest resource records it, and the
// routes the cluster has for it.
type Deployed struct {
	Lease   market.LeaseID
	Version []byte
	Group   market.ManifestGroup
	Routes  Routes
}

// Deployer puts leases on the cluster and takes them off (kube.Deployer).
//
// Record writes the durable record of what a lease must run (kube: its namespace and
// Manifest resource) and nothing else: once it returns nil the manifest survives any
// stop. Deploy brings the cluster to the group with only the routes given (the
// hostnames and leased-IP ports the lease holds), recording the group whole; applying
// the same group again repairs whatever drifted and changes nothing else. Teardown
// removes the lease; Deployed lists what the cluster records, this provider's only.
type Deployer interface {
	Record(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes Routes) error
	Deploy(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, routes Routes) error
	Teardown(ctx context.Context, id market.LeaseID) error
	Deployed(ctx context.Context) ([]Deployed, error)
}

// LeaseActive says whether a lease is active on the ledger; an error means the ledger
// could not say, and nothing is torn down on its account.
type LeaseActive func(ctx context.Context, id market.LeaseID) (bool, error)

// ManagerConfig tunes the deployment manager.
type ManagerConfig struct {
	// RetryMin and RetryMax bound the backoff between attempts to apply or tear down
	// a lease (defaults 1 s and 1 min).
	RetryMin, RetryMax time.Duration
	// Concurrency is how many leases are applied or torn down at once (default 16):
	// the number of workers. A burst of leases queues here rather than in the API
	// server, where hundreds of concurrent requests end in timeouts and retries.
	Concurrency int
}

// DefaultDeployConcurrency is ManagerConfig.Concurrency's default.
const DefaultDeployConcurrency = 16

// Phases of a lease's deployment.
const (
	PhaseDeploying = "deploying" // applying, or waiting to retry (Error says why)
	PhaseDeployed  = "deployed"  // the current manifest is applied
	PhaseClosing   = "closing"   // being torn down
)

// DeploymentState is what the manager reports of one lease.
type DeploymentState struct {
	Lease    market.LeaseID
	Phase    string
	Version  []byte
	Attempts int
	// Error is the last failure, while the manager retries.
	Error string
}

// Manager keeps the cluster running what every lease of ours must run. It is
// level-triggered: each lease is a key of a work queue, and a sync reads the lease's
// desired state (the manifest recorded in its Manifest resource, or its close) and
// brings the cluster to it, whatever happened before; a failed sync is retried with
// backoff, the error reported meanwhile. Syncs are queued by new manifests, closes,
// route changes, and Drifted (objects of the lease edited or deleted by anyone), so
// drift is repaired within seconds. At start it rebuilds from what the cluster
// records: leases still active on the ledger are synced again (converging whatever
// changed while it was down), the others torn down. A Kubernetes or ledger outage
// never closes a lease.
type Manager struct {
	cfg    ManagerConfig
	dep    Deployer
	active LeaseActive
	log    *slog.Logger

	mu     sync.Mutex
	leases map[market.LeaseID]*leaseState
	// closed remembers torn-down leases for an hour, so a late manifest cannot bring
	// one back.
	closed map[market.LeaseID]time.Time
	routes *routeIndex
	// locks: one acceptance or sync of a lease at a time (leaselock.go).
	locks *leaseLocks
	// queue is made by Run (its delaying loop is a goroutine); nil before.
	queue   workqueue.TypedRateLimitingInterface[market.LeaseID]
	rebuilt bool
	started chan struct{}
}

type leaseState struct {
	state DeploymentState
	group market.ManifestGroup
	close bool
	// gen counts changes of what the lease must run (manifest, routes): a sync
	// reports the lease deployed only if none happened while it applied.
	gen uint64
	// firstManifest is when the lease's first manifest was accepted (zero for a lease
	// rebuilt at start, whose first manifest came before).
	firstManifest time.Time
}

// NewManager returns a manager; it starts nothing.
func NewManager(cfg ManagerConfig, dep Deployer, active LeaseActive, log *slog.Logger) (*Manager, error) {
	if dep == nil || active == nil || log == nil {
		return nil, errors.New("deployment manager: deployer, ledger check and logger are required")
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(time.Minute, cfg.RetryMin)
	}
	switch {
	case cfg.Concurrency == 0:
		cfg.Concurrency = DefaultDeployConcurrency
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("deployment manager: concurrency %d is negative", cfg.Concurrency)
	}
	return &Manager{cfg: cfg, dep: dep, active: active, log: log, leases: map[market.LeaseID]*leaseState{}, closed: map[market.LeaseID]time.Time{},
		routes: newRouteIndex(), locks: newLeaseLocks(), started: make(chan struct{})}, nil
}

// Started is closed once the manager has rebuilt from the cluster and takes events.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Run rebuilds from the cluster, then syncs leases until ctx ends, and returns after
// every worker stopped.
func (m *Manager) Run(ctx context.Context) error {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[market.LeaseID](m.cfg.RetryMin, m.cfg.RetryMax))
	var workers sync.WaitGroup
	defer func() {
		queue.ShutDown()
		workers.Wait()
	}()
	deployed, err := m.deployedWithRetry(ctx)
	if err != nil {
		return nil // ctx ended
	}
	keep := make([]bool, len(deployed))
	for i := range deployed {
		d := &deployed[i]
		ok, err := m.active(ctx, d.Lease)
		switch {
		case err != nil:
			// The ledger cannot say: keep running it as it is.
			m.log.WarnContext(ctx, "lease state unknown at start; keeping it", slog.String("lease", d.Lease.String()), slog.String("error", err.Error()))
			keep[i] = true
		case ok:
			keep[i] = true
		default:
			m.log.InfoContext(ctx, "lease closed while we were down; tearing it down", slog.String("lease", d.Lease.String()))
		}
	}
	m.mu.Lock()
	// Routes the cluster has go back to the leases that had them, before any lease
	// asks again: a route withheld before the restart stays withheld.
	for i := range deployed {
		d := &deployed[i]
		if _, queued := m.leases[d.Lease]; !queued && keep[i] {
			m.routes.claim(d.Lease, d.Routes.intersect(RoutesOf(&d.Group)))
		}
	}
	for i := range deployed {
		d := &deployed[i]
		if _, queued := m.leases[d.Lease]; queued {
			continue // what arrived since is newer
		}
		if keep[i] {
			m.setManifestLocked(d.Lease, d.Version, d.Group)
		} else {
			m.closeLocked(d.Lease)
		}
	}
	m.queue, m.rebuilt = queue, true
	// Every lease known so far, including events that arrived before Run.
	for id := range m.leases {
		queue.Add(id)
	}
	m.mu.Unlock()
	for range m.cfg.Concurrency {
		workers.Go(func() {
			for m.next(ctx, queue) {
			}
		})
	}
	close(m.started)
	<-ctx.Done()
	return nil
}

func (m *Manager) deployedWithRetry(ctx context.Context) ([]Deployed, error) {
	var d []Deployed
	err := wait.Retry(ctx, m.cfg.RetryMin, m.cfg.RetryMax, func(ctx context.Context) (err error) {
		d, err = m.dep.Deployed(ctx)
		return err
	}, func(err error, pause time.Duration) {
		m.log.WarnContext(ctx, "reading the cluster's leases; retrying", slog.String("error", err.Error()), slog.Duration("in", pause))
	})
	if err != nil {
		return nil, err // ctx ended (Deployed is always retried)
	}
	return d, nil
}

// Manifest is the manifest the lease runs (or is being brought to), if any.
func (m *Manager) Manifest(id market.LeaseID) (version []byte, group market.ManifestGroup, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || l.close || l.state.Version == nil {
		return nil, market.ManifestGroup{}, false
	}
	return slices.Clone(l.state.Version), l.group, true
}

// MigrateHostnames gives hostnames the owner's deployments hold (or nobody holds) to
// the owner's lease of deployment dseq, group gseq, whose manifest must list them. The
// leases losing them, and the destination, are applied again so that the routes
// follow. It returns the hostnames moved; nothing moves if one cannot.
func (m *Manager) MigrateHostnames(owner string, hosts []string, dseq uint64, gseq uint32) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dest, want, err := m.destinationLocked(owner, dseq, gseq)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if !want.HasHost(h) {
			return nil, fmt.Errorf("%w: the manifest of deployment %d group %d has no HTTP port accepting hostname %q", ErrMigration, dseq, gseq, h)
		}
		if holder, ok := m.routes.hostHolder(h); ok && holder.Owner != owner {
			return nil, &HostnameError{Hostname: h}
		}
		if p, ok := m.routes.pending[hostKey(h)]; ok && p.owner != owner {
			return nil, &HostnameError{Hostname: h}
		}
		keys = append(keys, hostKey(h))
	}
	m.moveLocked(keys, dest)
	return hosts, nil
}

// MigrateEndpoints gives the owner's leased-IP endpoints (by SDL name) to the owner's
// lease of deployment dseq, group gseq: every port that lease's manifest exposes on
// them is routed to it, taken from whichever of the owner's deployments had it.
func (m *Manager) MigrateEndpoints(owner string, endpoints []string, dseq uint64, gseq uint32) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dest, want, err := m.destinationLocked(owner, dseq, gseq)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, name := range endpoints {
		n := len(keys)
		for _, p := range want.IPs {
			if p.Endpoint == name {
				keys = append(keys, ipKey(owner, p))
			}
		}
		if len(keys) == n {
			return nil, fmt.Errorf("%w: the manifest of deployment %d group %d exposes no port on IP endpoint %q", ErrMigration, dseq, gseq, name)
		}
	}
	m.moveLocked(keys, dest)
	return endpoints, nil
}

// destinationLocked finds the owner's lease of deployment dseq, group gseq, with a
// manifest, and the routes it asks for.
func (m *Manager) destinationLocked(owner string, dseq uint64, gseq uint32) (market.LeaseID, Routes, error) {
	if !m.rebuilt {
		return market.LeaseID{}, Routes{}, ErrStarting
	}
	for id, l := range m.leases {
		if id.Owner == owner && id.DSeq == dseq && id.GSeq == gseq && !l.close && l.state.Version != nil {
			return id, m.routes.wants[id], nil
		}
	}
	return market.LeaseID{}, Routes{}, fmt.Errorf("%w: you have no lease of deployment %d group %d here with a manifest", ErrMigration, dseq, gseq)
}

// moveLocked gives the routes to dest and applies again the leases whose routes changed.
func (m *Manager) moveLocked(keys []string, dest market.LeaseID) {
	changed := m.routes.move(keys, dest)
	changed[dest] = true
	m.reapplyLocked(slices.Collect(maps.Keys(changed)))
}

// reapplyLocked applies again leases whose routes changed.
func (m *Manager) reapplyLocked(ids []market.LeaseID) {
	for _, id := range ids {
		if l, ok := m.leases[id]; ok && !l.close && l.state.Version != nil {
			l.gen++
			l.state.Phase, l.state.Attempts, l.state.Error = PhaseDeploying, 0, ""
			m.enqueueLocked(id)
		}
	}
}

// Routes are what the cluster routes to a lease (its manifest's hostnames and leased
// IP ports it holds; the others are withheld).
func (m *Manager) Routes(id market.LeaseID) Routes {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.routes.held(id)
}

// HostnameHolder is the lease a hostname belongs to.
func (m *Manager) HostnameHolder(hostname string) (market.LeaseID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.routes.hostHolder(hostname)
}

func (m *Manager) setManifestLocked(id market.LeaseID, version []byte, group market.ManifestGroup) {
	l := m.leaseLocked(id)
	if l == nil || l.close {
		return
	}
	l.group = group
	l.gen++
	l.state.Version = slices.Clone(version)
	l.state.Phase, l.state.Attempts, l.state.Error = PhaseDeploying, 0, ""
	m.reapplyLocked(m.routes.set(id, RoutesOf(&group)))
	m.enqueueLocked(id)
}

// FirstManifestAt is when the lease's first manifest was accepted by this process
// (false for a lease rebuilt at start, or without a manifest yet): where its time to
// first ready starts.
func (m *Manager) FirstManifestAt(id market.LeaseID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || l.firstManifest.IsZero() {
		return time.Time{}, false
	}
	return l.firstManifest, true
}

// LeaseClosed tears a lease down (whether or not it had a manifest). Before Run has
// rebuilt, it is queued.
func (m *Manager) LeaseClosed(id market.LeaseID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeLocked(id)
}

// FollowLeases tears down each lease the lease feed says closed, until ctx ends. When
// the follower falls behind, closes may have been missed: lost is told, and the orphan
// check (which holds every lease namespace against the ledger) is the catch-up.
func (m *Manager) FollowLeases(ctx context.Context, f *leasefeed.Follower, lost func(error)) error {
	return f.Run(ctx, func(ev leasefeed.Event) {
		if ev.Closed != nil {
			m.LeaseClosed(ev.Closed.Lease)
		}
	}, lost)
}

func (m *Manager) closeLocked(id market.LeaseID) {
	l := m.leaseLocked(id)
	if l == nil {
		return
	}
	l.close = true
	l.gen++
	m.reapplyLocked(m.routes.release(id))
	l.state.Phase, l.state.Attempts, l.state.Error = PhaseClosing, 0, ""
	m.enqueueLocked(id)
}

// Drifted reports that objects of a lease changed or went away behind the manager's
// back (someone edited or deleted them): the lease is synced again, which restores
// them. It reports whether a sync was queued: leases the manager does not run are left
// to the orphan check, and a lease whose last sync failed is already queued for its
// retry (its backoff is kept: a namespace being deleted sends an event per object).
func (m *Manager) Drifted(id market.LeaseID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok && (l.close || l.state.Version != nil) && l.state.Error == "" && m.queue != nil {
		m.queue.Add(id)
		return true
	}
	return false
}

// leaseLocked returns the lease's state, creating it if needed. It is nil for a lease
// already torn down.
func (m *Manager) leaseLocked(id market.LeaseID) *leaseState {
	if l, ok := m.leases[id]; ok {
		return l
	}
	if _, closed := m.closed[id]; closed {
		return nil
	}
	l := &leaseState{state: DeploymentState{Lease: id}}
	m.leases[id] = l
	return l
}

// enqueueLocked queues a sync of the lease; before Run the lease waits in m.leases,
// which Run queues whole.
func (m *Manager) enqueueLocked(id market.LeaseID) {
	if m.queue != nil {
		m.queue.Add(id)
	}
}

// next takes one lease off the queue and syncs it; false once the queue shut down.
// The queue never hands one lease to two workers at once: events arriving during a
// sync queue it again for after.
func (m *Manager) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[market.LeaseID]) bool {
	id, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(id)
	if err := m.sync(ctx, id); err != nil {
		if ctx.Err() != nil {
			return true
		}
		m.log.WarnContext(ctx, "lease not applied; retrying", slog.String("lease", id.String()), slog.String("error", err.Error()),
			slog.Int("retries", queue.NumRequeues(id)))
		queue.AddRateLimited(id)
		return true
	}
	queue.Forget(id)
	return true
}

// sync brings the cluster to what the lease must run now: torn down if it is
// closing, the recorded manifest with the routes it holds otherwise. It holds the
// lease's lock, and reads what to run once it has it: a manifest accepted meanwhile
// is not written over by the one before.
func (m *Manager) sync(ctx context.Context, id market.LeaseID) error {
	if err := m.locks.lock(ctx, id); err != nil {
		return err
	}
	defer m.locks.unlock(id)
	m.mu.Lock()
	l, ok := m.leases[id]
	if !ok {
		m.mu.Unlock()
		return nil // torn down already
	}
	closing, version, group, routes, gen, phase := l.close, l.state.Version, l.group, m.routes.held(id), l.gen, l.state.Phase
	m.mu.Unlock()
	var err error
	switch {
	case closing:
		if err = m.dep.Teardown(ctx, id); err == nil {
			m.mu.Lock()
			delete(m.leases, id)
			now := time.Now()
			for k, at := range m.closed {
				if now.Sub(at) > time.Hour {
					delete(m.closed, k)
				}
			}
			m.closed[id] = now
			m.mu.Unlock()
			m.log.InfoContext(ctx, "lease torn down", slog.String("lease", id.String()))
			return nil
		}
	case version == nil:
		return nil // known (closed before its manifest came) but nothing to run yet
	default:
		if err = m.dep.Deploy(ctx, id, version, group, routes); err == nil {
			m.mu.Lock()
			if l.gen == gen {
				l.state.Phase, l.state.Error = PhaseDeployed, ""
			}
			m.mu.Unlock()
			if phase == PhaseDeployed {
				m.log.DebugContext(ctx, "lease synced", slog.String("lease", id.String()))
			} else {
				m.log.InfoContext(ctx, "lease deployed", slog.String("lease", id.String()), slog.String("version", fmt.Sprintf("%x", version)))
			}
			return nil
		}
	}
	m.mu.Lock()
	l.state.Attempts++
	l.state.Error = err.Error()
	m.mu.Unlock()
	return err
}

// State reports one lease's deployment state.
func (m *Manager) State(id market.LeaseID) (DeploymentState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok {
		return DeploymentState{}, false
	}
	return l.state, true
}

// States reports every lease the manager handles, by lease ID.
func (m *Manager) States() []DeploymentState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DeploymentState, 0, len(m.leases))
	for _, l := range m.leases {
		out = append(out, l.state)
	}
	slices.SortFunc(out, func(a, b DeploymentState) int { return strings.Compare(a.Lease.String(), b.Lease.String()) })
	return out
}
