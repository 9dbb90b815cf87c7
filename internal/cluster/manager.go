package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"berth.dev/berth/internal/market"
)

// Deployed is a lease the cluster runs, as its Manifest resource records it, and the
// routes the cluster has for it.
type Deployed struct {
	Lease   market.LeaseID
	Version []byte
	Group   market.ManifestGroup
	Routes  Routes
}

// Deployer puts leases on the cluster and takes them off (kube.Deployer). Deploy
// applies the group with only the routes given (the hostnames and leased-IP ports the
// lease holds); the group is recorded whole.
type Deployer interface {
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
	// (defaults 1 s and 1 min).
	RetryMin, RetryMax time.Duration
	// Concurrency is how many leases are applied or torn down at once (default 16).
	// A burst of leases queues here rather than in the API server, where hundreds of
	// concurrent requests end in timeouts and retries.
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

// Manager runs one worker per lease that has a manifest: it applies the newest
// manifest until the cluster takes it (retrying with backoff, the error reported
// meanwhile), applies updates in place, and tears the lease down when it closes. At
// start it rebuilds from what the cluster records: leases still active on the ledger
// are applied again (converging whatever changed while it was down), the others torn
// down. A Kubernetes or ledger outage never closes a lease.
type Manager struct {
	cfg    ManagerConfig
	dep    Deployer
	active LeaseActive
	log    *slog.Logger

	mu      sync.Mutex
	workers map[market.LeaseID]*worker
	// closed remembers torn-down leases for an hour, so a late manifest cannot bring
	// one back.
	closed  map[market.LeaseID]time.Time
	routes  *routeIndex
	ctx     context.Context //nolint:containedctx // the Run context, handed to workers started by method calls
	wg      sync.WaitGroup
	slots   chan struct{} // one per lease being applied or torn down
	started chan struct{}
}

type worker struct {
	kick  chan struct{}
	state DeploymentState
	group market.ManifestGroup
	close bool
	// running: a goroutine is working on the lease. It exists only while there is
	// work (applying, retrying, tearing down), so thousands of running leases cost no
	// goroutines.
	running bool
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
	return &Manager{cfg: cfg, dep: dep, active: active, log: log, workers: map[market.LeaseID]*worker{}, closed: map[market.LeaseID]time.Time{},
		routes: newRouteIndex(), started: make(chan struct{}), slots: make(chan struct{}, cfg.Concurrency)}, nil
}

// Started is closed once the manager has rebuilt from the cluster and takes events.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Run rebuilds from the cluster, then serves until ctx ends, and returns after every
// worker stopped.
func (m *Manager) Run(ctx context.Context) error {
	defer m.wg.Wait()
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
	m.ctx = ctx
	// Routes the cluster has go back to the leases that had them, before any lease
	// asks again: a route withheld before the restart stays withheld.
	for i := range deployed {
		d := &deployed[i]
		if _, queued := m.workers[d.Lease]; !queued && keep[i] {
			m.routes.claim(d.Lease, d.Routes.intersect(RoutesOf(&d.Group)))
		}
	}
	for i := range deployed {
		d := &deployed[i]
		if _, queued := m.workers[d.Lease]; queued {
			continue // what arrived since is newer
		}
		if keep[i] {
			m.setManifestLocked(d.Lease, d.Version, d.Group)
		} else {
			m.closeLocked(d.Lease)
		}
	}
	// Start the workers, including those for events that arrived before Run.
	for id, w := range m.workers {
		m.startLocked(id, w)
	}
	m.mu.Unlock()
	close(m.started)
	<-ctx.Done()
	return nil
}

func (m *Manager) deployedWithRetry(ctx context.Context) ([]Deployed, error) {
	backoff := m.cfg.RetryMin
	for {
		d, err := m.dep.Deployed(ctx)
		if err == nil {
			return d, nil
		}
		m.log.WarnContext(ctx, "reading the cluster's leases; retrying", slog.String("error", err.Error()), slog.Duration("in", backoff))
		if !sleep(ctx, backoff) {
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, m.cfg.RetryMax)
	}
}

// LeaseManifest is the group one lease must run.
type LeaseManifest struct {
	Lease market.LeaseID
	Group market.ManifestGroup
}

// ManifestReceived sets the manifest a lease must run (a new one, or an update). It
// fails, changing nothing, before Run has rebuilt from the cluster (ErrStarting: the
// routes the cluster has are not known yet), when the lease is closed (ErrLeaseClosed),
// or when another tenant holds one of the group's hostnames (a *HostnameError). A hostname another deployment of the same tenant holds is
// accepted but withheld: the lease gets no route for it until MigrateHostnames.
func (m *Manager) ManifestReceived(id market.LeaseID, version []byte, group market.ManifestGroup) error {
	return m.ManifestsReceived(version, []LeaseManifest{{Lease: id, Group: group}})
}

// ManifestsReceived sets the manifests of several leases (a deployment's groups) at
// once: all of them, or, when one would fail as ManifestReceived does, none.
func (m *Manager) ManifestsReceived(version []byte, leases []LeaseManifest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		return ErrStarting
	}
	for i := range leases {
		id := leases[i].Lease
		if w, ok := m.workers[id]; (ok && w.close) || m.isClosedLocked(id) {
			return fmt.Errorf("lease %s: %w", id, ErrLeaseClosed)
		}
		if err := m.routes.check(id, RoutesOf(&leases[i].Group)); err != nil {
			return fmt.Errorf("lease %s: %w", id, err)
		}
	}
	for i := range leases {
		m.setManifestLocked(leases[i].Lease, version, leases[i].Group)
	}
	return nil
}

func (m *Manager) isClosedLocked(id market.LeaseID) bool {
	_, closed := m.closed[id]
	return closed || (m.ctx != nil && m.ctx.Err() != nil)
}

// Manifest is the manifest the lease runs (or is being brought to), if any.
func (m *Manager) Manifest(id market.LeaseID) (version []byte, group market.ManifestGroup, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[id]
	if !ok || w.close || w.state.Version == nil {
		return nil, market.ManifestGroup{}, false
	}
	return slices.Clone(w.state.Version), w.group, true
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
	if m.ctx == nil {
		return market.LeaseID{}, Routes{}, ErrStarting
	}
	for id, w := range m.workers {
		if id.Owner == owner && id.DSeq == dseq && id.GSeq == gseq && !w.close && w.state.Version != nil {
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
		if w, ok := m.workers[id]; ok && !w.close && w.state.Version != nil {
			w.state.Phase, w.state.Attempts, w.state.Error = PhaseDeploying, 0, ""
			poke(w.kick)
			m.startLocked(id, w)
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
	w := m.workerLocked(id)
	if w == nil || w.close {
		return
	}
	w.group = group
	w.state.Version = slices.Clone(version)
	w.state.Phase, w.state.Attempts, w.state.Error = PhaseDeploying, 0, ""
	m.reapplyLocked(m.routes.set(id, RoutesOf(&group)))
	poke(w.kick)
	m.startLocked(id, w)
}

// LeaseClosed tears a lease down (whether or not it had a manifest). Before Run has
// started, it is queued.
func (m *Manager) LeaseClosed(id market.LeaseID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeLocked(id)
}

func (m *Manager) closeLocked(id market.LeaseID) {
	w := m.workerLocked(id)
	if w == nil {
		return
	}
	w.close = true
	m.reapplyLocked(m.routes.release(id))
	w.state.Phase, w.state.Attempts, w.state.Error = PhaseClosing, 0, ""
	poke(w.kick)
	m.startLocked(id, w)
}

// workerLocked returns the lease's worker, creating it if needed. It is nil for a
// lease already torn down, or after Run ended.
func (m *Manager) workerLocked(id market.LeaseID) *worker {
	if w, ok := m.workers[id]; ok {
		return w
	}
	if m.isClosedLocked(id) {
		return nil
	}
	w := &worker{kick: make(chan struct{}, 1), state: DeploymentState{Lease: id}}
	m.workers[id] = w
	return w
}

// startLocked starts the lease's goroutine unless it runs, or Run has not rebuilt yet
// (Run starts the workers queued meanwhile).
func (m *Manager) startLocked(id market.LeaseID, w *worker) {
	if w.running || m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	w.running = true
	m.wg.Add(1)
	go m.work(m.ctx, id, w)
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// work applies the lease's desired state until it holds, then stops; the next event
// starts it again. It stops too once the lease is torn down, or ctx ends.
func (m *Manager) work(ctx context.Context, id market.LeaseID, w *worker) {
	defer m.wg.Done()
	backoff := m.cfg.RetryMin
	for {
		m.mu.Lock()
		// The cluster routes only what the lease holds (routes.go).
		closing, phase, group, version, routes := w.close, w.state.Phase, w.group, w.state.Version, m.routes.held(id)
		m.mu.Unlock()
		var err error
		switch {
		case closing:
			err = m.limited(ctx, func() error { return m.dep.Teardown(ctx, id) })
			if err == nil {
				m.mu.Lock()
				delete(m.workers, id)
				now := time.Now()
				for k, at := range m.closed {
					if now.Sub(at) > time.Hour {
						delete(m.closed, k)
					}
				}
				m.closed[id] = now
				m.mu.Unlock()
				m.log.InfoContext(ctx, "lease torn down", slog.String("lease", id.String()))
				return
			}
		case phase == PhaseDeploying:
			err = m.limited(ctx, func() error { return m.dep.Deploy(ctx, id, version, group, routes) })
			if err == nil {
				m.mu.Lock()
				// Unless a newer manifest or the close arrived meanwhile.
				if !w.close && slices.Equal(w.state.Version, version) {
					w.state.Phase, w.state.Error = PhaseDeployed, ""
				}
				m.mu.Unlock()
				m.log.InfoContext(ctx, "lease deployed", slog.String("lease", id.String()), slog.String("version", fmt.Sprintf("%x", version)))
				backoff = m.cfg.RetryMin
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.mu.Lock()
			w.state.Attempts++
			w.state.Error = err.Error()
			m.mu.Unlock()
			m.log.WarnContext(ctx, "lease not applied; retrying", slog.String("lease", id.String()), slog.String("error", err.Error()), slog.Duration("in", backoff))
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, m.cfg.RetryMax)
			continue
		}
		// Applied: stop unless something arrived meanwhile. Events set the state and
		// poke under the lock, so a kick is either seen here or starts a new goroutine.
		m.mu.Lock()
		select {
		case <-w.kick:
			m.mu.Unlock()
		default:
			w.running = false
			m.mu.Unlock()
			return
		}
	}
}

// limited runs fn once one of the Concurrency slots is free.
func (m *Manager) limited(ctx context.Context, fn func() error) error {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-m.slots }()
	return fn()
}

// State reports one lease's deployment state.
func (m *Manager) State(id market.LeaseID) (DeploymentState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[id]
	if !ok {
		return DeploymentState{}, false
	}
	return w.state, true
}

// States reports every lease the manager handles.
func (m *Manager) States() []DeploymentState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DeploymentState, 0, len(m.workers))
	for _, w := range m.workers {
		out = append(out, w.state)
	}
	slices.SortFunc(out, func(a, b DeploymentState) int {
		switch as, bs := a.Lease.String(), b.Lease.String(); {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	})
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
