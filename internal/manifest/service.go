package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/leasefeed"
)

// Errors Submit returns besides *Error (ErrInvalid) and the deployment manager's
// deploy.ErrHostnameInUse and deploy.ErrLeaseClosed.
var (
	// ErrNotFound: the tenant has no active deployment with that sequence, or none
	// of its leases is with this provider.
	ErrNotFound = errors.New("not found")
	// ErrHostnameBlocked: the provider does not serve this hostname.
	ErrHostnameBlocked = errors.New("hostname blocked")
	// ErrUnavailable: the ledger could not be asked; try again.
	ErrUnavailable = errors.New("ledger unavailable")
)

// DefaultTimeout is how long a won lease waits for its manifest before the watchdog
// closes the bid (Akash's default too).
const DefaultTimeout = 5 * time.Minute

// Config tunes the manifest service.
type Config struct {
	// Provider is this provider's address: only its leases are considered.
	Provider string
	// Timeout is the watchdog's wait for a won lease's manifest; 0 has no watchdog (as
	// gateway.manifest_timeout: 0s). Providers default to DefaultTimeout.
	Timeout time.Duration
	// BlockedHostnames are hostnames tenants may not use: "example.com" blocks that
	// name, ".example.com" every name under it (not example.com itself).
	BlockedHostnames []string
	// IngressDomain, when set, gives every service's HTTP ingress port a hostname of
	// the provider's under it (deploy.IngressHost), as Akash providers do; tenants may
	// not ask for names under it themselves.
	IngressDomain string
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Provider == "" {
		return errors.New("manifest service: provider address is required")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("manifest service: timeout %s: want a duration, or 0 for no watchdog", c.Timeout)
	}
	if c.IngressDomain != "" && !market.ValidHostname(c.IngressDomain) {
		return fmt.Errorf("manifest service: ingress domain %q is not a lowercase DNS name", c.IngressDomain)
	}
	for i, h := range c.BlockedHostnames {
		if !market.ValidHostname(strings.TrimPrefix(h, ".")) {
			return fmt.Errorf("manifest service: blocked hostname [%d] %q is not a lowercase DNS name (or .domain)", i, h)
		}
	}
	return nil
}

// Ledger is what the service asks the ledger.
type Ledger interface {
	// Deployment is a deployment with its groups (ledger.ErrNotFound when absent).
	Deployment(ctx context.Context, id market.DeploymentID) (ledger.DeploymentResponse, error)
	// ActiveLeases are the provider's active leases of a deployment.
	ActiveLeases(ctx context.Context, id market.DeploymentID, provider string) ([]market.LeaseID, error)
	// BlockTime is the time of the block at a height.
	BlockTime(ctx context.Context, height int64) (time.Time, error)
}

// Deployments takes accepted manifests (deploy.Manager). ManifestsReceived returns
// nil only once the manifests are durable.
type Deployments interface {
	ManifestsReceived(ctx context.Context, version []byte, leases []deploy.LeaseManifest) error
	Manifest(id market.LeaseID) ([]byte, market.ManifestGroup, bool)
	// Started is closed once the leases the cluster records are known (before that,
	// Manifest does not know every lease that has one).
	Started() <-chan struct{}
}

// StartGrace is the least time a lease still waiting for its manifest when the
// provider starts is given before the watchdog closes it: the tenant's client may be
// retrying a manifest the provider could not take while it was down.
const StartGrace = time.Minute

// BidCloser closes one of our bids on the ledger (which closes its lease).
type BidCloser func(ctx context.Context, id market.BidID, reason string) error

// Service accepts manifests and runs the watchdog.
type Service struct {
	cfg     Config
	ledger  Ledger
	deploy  Deployments
	closeFn BidCloser
	log     *slog.Logger
	now     func() time.Time
	started time.Time
	metrics *metrics

	mu sync.Mutex
	// waiting: won leases without a manifest yet, and when the watchdog fires.
	waiting map[market.LeaseID]time.Time
	// closed: leases closed while their bid's close was under way (not retried).
	closed map[market.LeaseID]bool
	wake   chan struct{}
}

// New returns a manifest service; it starts nothing (Run runs the watchdog).
func New(cfg Config, l Ledger, d Deployments, closeBid BidCloser, log *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if l == nil || d == nil || closeBid == nil || log == nil {
		return nil, errors.New("manifest service: ledger, deployments, bid closer and logger are required")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, ledger: l, deploy: d, closeFn: closeBid, log: log, now: time.Now, started: time.Now(), metrics: m,
		waiting: map[market.LeaseID]time.Time{}, closed: map[market.LeaseID]bool{}, wake: make(chan struct{}, 1)}, nil
}

// Submit accepts a tenant's manifest for its deployment dseq and hands each of our
// active leases of the deployment its group. owner is the authenticated tenant, so a
// tenant can only ever reach its own deployments. Nothing is handed over unless every
// check passes for every lease, and nil is returned only once the manifest is durable
// (it survives any stop of the provider): sending the same manifest again is harmless,
// so a tenant who lost the answer sends it again.
func (s *Service) Submit(ctx context.Context, owner string, dseq uint64, m market.Manifest) (err error) {
	defer func() { s.metrics.received.WithLabelValues(outcome(err)).Inc() }()
	if err := Validate(m); err != nil {
		return err
	}
	if err := s.checkBlocked(m); err != nil {
		return err
	}
	did := market.DeploymentID{Owner: owner, DSeq: dseq}
	dep, err := s.ledger.Deployment(ctx, did)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return fmt.Errorf("deployment %d: %w", dseq, ErrNotFound)
	case err != nil:
		return fmt.Errorf("deployment %s: %w: %w", did, ErrUnavailable, err)
	case dep.Deployment.State != ledger.DeploymentActive:
		return fmt.Errorf("deployment %d is %s: %w", dseq, dep.Deployment.State, ErrNotFound)
	}
	if err := CheckVersion(m, dep.Deployment.Version); err != nil {
		return err
	}
	specs := make([]market.GroupSpec, len(dep.Groups))
	gseqs := make(map[string]uint32, len(dep.Groups))
	for i := range dep.Groups {
		g := &dep.Groups[i]
		specs[i] = g.Spec
		gseqs[g.Spec.Name] = g.ID.GSeq
	}
	if err := CheckDeployment(m, specs); err != nil {
		return err
	}
	leases, err := s.ledger.ActiveLeases(ctx, did, s.cfg.Provider)
	if err != nil {
		return fmt.Errorf("leases of %s: %w: %w", did, ErrUnavailable, err)
	}
	var batch []deploy.LeaseManifest
	for _, id := range leases {
		for i := range m {
			if gseqs[m[i].Name] == id.GSeq {
				batch = append(batch, deploy.LeaseManifest{Lease: id, Group: deploy.WithIngressHosts(id, m[i], s.cfg.IngressDomain)})
			}
		}
	}
	if len(batch) == 0 {
		return fmt.Errorf("deployment %d has no active lease with this provider: %w", dseq, ErrNotFound)
	}
	if err := s.deploy.ManifestsReceived(ctx, dep.Deployment.Version, batch); err != nil {
		return err
	}
	s.mu.Lock()
	for _, b := range batch {
		delete(s.waiting, b.Lease)
	}
	s.metrics.waiting.Set(float64(len(s.waiting)))
	s.mu.Unlock()
	for _, b := range batch {
		s.log.InfoContext(ctx, "manifest received", slog.String("lease", b.Lease.String()), slog.String("version", fmt.Sprintf("%x", dep.Deployment.Version)))
	}
	return nil
}

// Blocked reports whether the provider refuses hostname h. A wildcard is refused when
// it could receive a refused name's requests too: *.example.com when example.com's
// subdomains, or one of them, are refused.
func (s *Service) Blocked(h string) bool {
	h = strings.ToLower(h)
	// The provider's own hostnames are under its ingress domain.
	if d := s.cfg.IngressDomain; d != "" && (h == d || strings.HasSuffix(h, "."+d) || market.HostCovers(h, "x."+d)) {
		return true
	}
	for _, b := range s.cfg.BlockedHostnames {
		if h == b || market.HostCovers(h, strings.TrimPrefix(b, "*")) {
			return true
		}
		if sub, ok := strings.CutPrefix(b, "."); ok && (strings.HasSuffix(h, b) || market.HostCovers(h, "x."+sub)) {
			return true
		}
	}
	return false
}

func (s *Service) checkBlocked(m market.Manifest) error {
	for gi := range m {
		for si := range m[gi].Services {
			for ei := range m[gi].Services[si].Expose {
				for hi, h := range m[gi].Services[si].Expose[ei].Hosts {
					if s.Blocked(h) {
						return fmt.Errorf("[%d].services[%d].expose[%d].hosts[%d]: hostname %q is not served by this provider: %w", gi, si, ei, hi, h, ErrHostnameBlocked)
					}
				}
			}
		}
	}
	return nil
}

// LeaseWon starts the watchdog for a lease we won at height created (unless it
// already has a manifest, as a lease rebuilt at start may). The time runs from the
// lease's creation, so a restart does not give it a new one; a lease found waiting
// at start is given at least StartGrace. The ledger is asked for the creation
// block's time; when it cannot say, the time runs from now.
func (s *Service) LeaseWon(ctx context.Context, id market.LeaseID, created int64) {
	if s.cfg.Timeout == 0 {
		return
	}
	if _, _, ok := s.deploy.Manifest(id); ok {
		return
	}
	now := s.now()
	due := now.Add(s.cfg.Timeout)
	if created > 0 {
		at, err := s.ledger.BlockTime(ctx, created)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "lease creation time unknown; its manifest watchdog runs from now",
				slog.String("lease", id.String()), slog.Int64("height", created), slog.String("error", err.Error()))
		default:
			due = at.Add(s.cfg.Timeout)
			if grace := s.started.Add(min(StartGrace, s.cfg.Timeout)); due.Before(grace) {
				due = grace
			}
		}
	}
	s.mu.Lock()
	if _, ok := s.waiting[id]; !ok {
		s.waiting[id] = due
	}
	s.metrics.waiting.Set(float64(len(s.waiting)))
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// LeaseClosed stops the watchdog for a lease.
func (s *Service) LeaseClosed(id market.LeaseID) {
	s.mu.Lock()
	if _, ok := s.waiting[id]; !ok {
		s.closed[id] = true // its bid's close may be under way: do not retry it
	}
	delete(s.waiting, id)
	s.metrics.waiting.Set(float64(len(s.waiting)))
	s.mu.Unlock()
}

// FollowLeases runs the watchdog's side of the lease feed until ctx ends: a lease won
// starts its watchdog (LeaseWon), a lease closed stops it (LeaseClosed). It starts
// once the deployments are known (Deployments.Started; the follower buffers what
// comes meanwhile), since a lease rebuilt with its manifest needs no watchdog. Leases
// won while the follower fell behind get no watchdog: they are not closed for lack of
// a manifest, the error being on the tenant's side.
func (s *Service) FollowLeases(ctx context.Context, f *leasefeed.Follower) error {
	select {
	case <-s.deploy.Started():
	case <-ctx.Done():
		f.Close()
		return nil
	}
	return f.Run(ctx, func(ev leasefeed.Event) {
		switch {
		case ev.Won != nil:
			s.LeaseWon(ctx, ev.Won.Lease, ev.Won.CreatedAt)
		case ev.Closed != nil:
			s.LeaseClosed(ev.Closed.Lease)
		}
	}, func(err error) {
		s.log.WarnContext(ctx, "lease feed fell behind; leases won meanwhile have no manifest watchdog", slog.String("error", err.Error()))
	})
}

// Waiting counts the leases the watchdog waits on, for status.
func (s *Service) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// WaitingLeases lists the leases the watchdog waits on.
func (s *Service) WaitingLeases() []market.LeaseID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]market.LeaseID, 0, len(s.waiting))
	for id := range s.waiting {
		out = append(out, id)
	}
	return out
}

// Run runs the watchdog until ctx ends: when a won lease's time is up without a
// manifest, its bid is closed with reason manifest_timeout. A failed close is retried
// a minute later. Nothing is closed before the deployment manager knows every
// manifest the cluster records (a manifest accepted before a restart is not missing).
func (s *Service) Run(ctx context.Context) error {
	select {
	case <-s.deploy.Started():
	case <-ctx.Done():
		return nil
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		due, next := s.due()
		for _, id := range due {
			if _, _, ok := s.deploy.Manifest(id); ok {
				continue
			}
			s.log.WarnContext(ctx, "no manifest in time; closing the bid", slog.String("lease", id.String()), slog.Duration("timeout", s.cfg.Timeout))
			err := s.closeFn(ctx, id.Bid(), ledger.ReasonManifestTimeout)
			switch {
			case err == nil:
				s.metrics.timeouts.Inc()
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrInvalidState):
				// The bid is gone or closed already (the tenant closed first).
			default:
				s.log.WarnContext(ctx, "close the bid of a lease without manifest; retrying", slog.String("lease", id.String()), slog.String("error", err.Error()))
				s.retry(id, time.Minute)
			}
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-t.C:
		}
	}
}

// due removes and returns the leases whose time is up, and how long until the next.
func (s *Service) due() ([]market.LeaseID, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next := time.Hour
	var out []market.LeaseID
	for id, at := range s.waiting {
		if !at.After(now) {
			out = append(out, id)
			delete(s.waiting, id)
			continue
		}
		next = min(next, at.Sub(now))
	}
	// Closes noted for bids not being closed now are not needed any more.
	clear(s.closed)
	s.metrics.waiting.Set(float64(len(s.waiting)))
	return out, next
}

// retry watches the lease again unless it closed meanwhile.
func (s *Service) retry(id market.LeaseID, after time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed[id] {
		delete(s.closed, id)
		return
	}
	s.waiting[id] = s.now().Add(after)
	s.metrics.waiting.Set(float64(len(s.waiting)))
}

// outcome is the metric label for a submission's result.
func outcome(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrNotFound), errors.Is(err, deploy.ErrLeaseClosed):
		return "no_lease"
	case errors.Is(err, ErrHostnameBlocked), errors.Is(err, deploy.ErrHostnameInUse):
		return "hostname"
	case errors.Is(err, ErrUnavailable), errors.Is(err, deploy.ErrStarting):
		return "unavailable"
	}
	return "error"
}

type metrics struct {
	received *prometheus.CounterVec
	waiting  prometheus.Gauge
	timeouts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_manifests_received_total", Help: "Manifests tenants sent, by outcome (accepted, invalid, no_lease, hostname, unavailable, error).",
		}, []string{"outcome"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_manifest_waiting_leases", Help: "Won leases waiting for their manifest (the watchdog closes them when the time is up).",
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_manifest_timeouts_total", Help: "Bids closed because no manifest arrived in time (reason manifest_timeout).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.received, m.waiting, m.timeouts} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("manifest metrics: %w", err)
			}
		}
	}
	return m, nil
}
