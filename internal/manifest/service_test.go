package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	tenant   = "akash1tenant"
	provider = "akash1provider"
)

// fakeLedger holds deployments and leases; fail makes every query fail. Block h was
// made at genesis + h seconds.
type fakeLedger struct {
	deployments map[market.DeploymentID]ledger.DeploymentResponse
	leases      []market.LeaseID
	fail        error
	genesis     time.Time
}

func (f *fakeLedger) BlockTime(_ context.Context, h int64) (time.Time, error) {
	if f.fail != nil {
		return time.Time{}, f.fail
	}
	return f.genesis.Add(time.Duration(h) * time.Second), nil
}

func (f *fakeLedger) Deployment(_ context.Context, id market.DeploymentID) (ledger.DeploymentResponse, error) {
	if f.fail != nil {
		return ledger.DeploymentResponse{}, f.fail
	}
	d, ok := f.deployments[id]
	if !ok {
		return d, ledger.ErrNotFound
	}
	return d, nil
}

func (f *fakeLedger) ActiveLeases(_ context.Context, id market.DeploymentID, prov string) ([]market.LeaseID, error) {
	var out []market.LeaseID
	for _, l := range f.leases {
		if l.Deployment() == id && l.Provider == prov {
			out = append(out, l)
		}
	}
	return out, nil
}

// fakeDeployments records what it is handed; it has started once started is closed.
type fakeDeployments struct {
	mu      sync.Mutex
	got     map[market.LeaseID]market.ManifestGroup
	err     error
	started chan struct{}
}

func (f *fakeDeployments) Started() <-chan struct{} { return f.started }

func (f *fakeDeployments) ManifestsReceived(_ context.Context, _ []byte, leases []deploy.LeaseManifest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for _, l := range leases {
		f.got[l.Lease] = l.Group
	}
	return nil
}

func (f *fakeDeployments) Manifest(id market.LeaseID) ([]byte, market.ManifestGroup, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.got[id]
	return []byte{1}, g, ok
}

// closer records closed bids.
type closer struct {
	mu     sync.Mutex
	closed map[market.BidID]string
}

func (c *closer) close(_ context.Context, id market.BidID, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed[id] = reason
	return nil
}

func (c *closer) reason(id market.BidID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.closed[id]
	return r, ok
}

type fixture struct {
	svc    *Service
	ledger *fakeLedger
	deploy *fakeDeployments
	closer *closer
	m      market.Manifest
	lease  market.LeaseID
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureOf(t, cfg, "aa-CodiMD_deploy")
}

// newFixtureOf is a fixture whose deployment is the corpus file's.
func newFixtureOf(t *testing.T, cfg Config, corpus string) *fixture {
	t.Helper()
	m, groups := corpusManifest(t, corpus)
	did := market.DeploymentID{Owner: tenant, DSeq: 7}
	dep := ledger.DeploymentResponse{Deployment: ledger.Deployment{ID: did, State: ledger.DeploymentActive, Version: m.Version()}}
	for i, g := range groups {
		dep.Groups = append(dep.Groups, ledger.Group{ID: did.Group(uint32(i + 1)), State: ledger.GroupOpen, Spec: g})
	}
	f := &fixture{
		ledger: &fakeLedger{deployments: map[market.DeploymentID]ledger.DeploymentResponse{did: dep}},
		deploy: &fakeDeployments{got: map[market.LeaseID]market.ManifestGroup{}, started: make(chan struct{})},
		closer: &closer{closed: map[market.BidID]string{}},
		m:      m,
		lease:  market.LeaseID{Owner: tenant, DSeq: 7, GSeq: 1, OSeq: 1, Provider: provider},
	}
	close(f.deploy.started)
	f.ledger.leases = []market.LeaseID{f.lease, {Owner: tenant, DSeq: 7, GSeq: 1, OSeq: 1, Provider: "akash1else"}}
	cfg.Provider = provider
	svc, err := New(cfg, f.ledger, f.deploy, f.closer.close, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	return f
}

func TestSubmit(t *testing.T) {
	f := newFixture(t, Config{BlockedHostnames: []string{"blocked.example.com", ".internal.example.com"}})
	ctx := t.Context()
	if err := f.svc.Submit(ctx, tenant, 7, f.m); err != nil {
		t.Fatal(err)
	}
	if g, ok := f.deploy.got[f.lease]; !ok || g.Name != f.m[0].Name || len(f.deploy.got) != 1 {
		t.Fatalf("handed %v", f.deploy.got)
	}

	// Another tenant naming the same dseq reaches only its own (absent) deployment.
	if err := f.svc.Submit(ctx, "akash1other", 7, f.m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant: %v", err)
	}
	if err := f.svc.Submit(ctx, tenant, 8, f.m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown dseq: %v", err)
	}
	// A changed manifest is not the deployment's version.
	changed := mustDecode(t, f.m)
	changed[0].Services[0].Image += "-2"
	if err := f.svc.Submit(ctx, tenant, 7, changed); !errors.Is(err, ErrInvalid) {
		t.Fatalf("changed manifest: %v", err)
	}
	// Blocked hostnames, exact and by domain.
	for _, h := range []string{"blocked.example.com", "a.internal.example.com"} {
		hosted := mustDecode(t, f.m)
		hosted[0].Services[0].Expose[0].Hosts = []string{h}
		if err := f.svc.Submit(ctx, tenant, 7, hosted); !errors.Is(err, ErrHostnameBlocked) {
			t.Fatalf("hostname %s: %v", h, err)
		}
	}
	if f.svc.Blocked("internal.example.com") || f.svc.Blocked("notblocked.example.com") {
		t.Fatal("blocked too much")
	}
	// A wildcard that could receive a blocked name's requests is blocked too; one
	// beside them is not.
	for h, want := range map[string]bool{
		"*.example.com": true, "*.internal.example.com": true, "*.a.internal.example.com": true,
		"*.other.example.com": false, "*.example.org": false,
	} {
		if got := f.svc.Blocked(h); got != want {
			t.Errorf("Blocked(%q) = %v, want %v", h, got, want)
		}
	}
	// No lease with us.
	f.ledger.leases = f.ledger.leases[1:]
	if err := f.svc.Submit(ctx, tenant, 7, f.m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no lease with us: %v", err)
	}
	// The ledger cannot answer.
	f.ledger.fail = errors.New("connection refused")
	if err := f.svc.Submit(ctx, tenant, 7, f.m); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ledger down: %v", err)
	}
	// A closed deployment.
	f.ledger.fail = nil
	d := f.ledger.deployments[f.lease.Deployment()]
	d.Deployment.State = ledger.DeploymentClosed
	f.ledger.deployments[f.lease.Deployment()] = d
	if err := f.svc.Submit(ctx, tenant, 7, f.m); !errors.Is(err, ErrNotFound) {
		t.Fatalf("closed deployment: %v", err)
	}
}

func mustDecode(t *testing.T, m market.Manifest) market.Manifest {
	t.Helper()
	b := m.AppendCanonicalJSON(nil)
	out, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWatchdog(t *testing.T) {
	f := newFixture(t, Config{Timeout: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	late := market.LeaseID{Owner: tenant, DSeq: 9, GSeq: 1, OSeq: 1, Provider: provider}
	closedByTenant := market.LeaseID{Owner: tenant, DSeq: 10, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(ctx, f.lease, 0)
	f.svc.LeaseWon(ctx, late, 0)
	f.svc.LeaseWon(ctx, closedByTenant, 0)
	f.svc.LeaseClosed(closedByTenant)
	if err := f.svc.Submit(t.Context(), tenant, 7, f.m); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the late lease's bid closed", func() bool {
		r, ok := f.closer.reason(late.Bid())
		return ok && r == ledger.ReasonManifestTimeout
	})
	if _, ok := f.closer.reason(f.lease.Bid()); ok {
		t.Fatal("a lease with its manifest was closed")
	}
	if _, ok := f.closer.reason(closedByTenant.Bid()); ok {
		t.Fatal("a closed lease's bid was closed again")
	}
	if n := f.svc.Waiting(); n != 0 {
		t.Fatalf("%d leases still waiting", n)
	}
	// A lease that already runs a manifest (rebuilt at start) is not watched.
	f.svc.LeaseWon(ctx, f.lease, 0)
	if n := f.svc.Waiting(); n != 0 {
		t.Fatalf("a lease with a manifest is watched")
	}
}

// TestWatchdogDoesNotResurrectClosedLeases: a lease that closes while its bid's close
// fails is not watched again, and a bid the ledger already closed is not retried.
func TestWatchdogDoesNotResurrectClosedLeases(t *testing.T) {
	f := newFixture(t, Config{Timeout: 20 * time.Millisecond})
	entered := make(chan market.BidID, 4)
	release := make(chan error)
	f.svc.closeFn = func(_ context.Context, id market.BidID, _ string) error {
		entered <- id
		return <-release
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.svc.Run(ctx) }()
	defer func() {
		cancel()
		close(release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	racing := market.LeaseID{Owner: tenant, DSeq: 21, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(ctx, racing, 0)
	<-entered
	f.svc.LeaseClosed(racing) // the tenant closed it while the close was in flight
	release <- errors.New("broadcast: connection reset")
	already := market.LeaseID{Owner: tenant, DSeq: 22, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(ctx, already, 0)
	<-entered
	release <- fmt.Errorf("close bid: %w", ledger.ErrInvalidState)
	// The loop is sequential: the second close began only after the first's retry
	// decision, so a resurrected lease would be waiting now (for a minute).
	testenv.Eventually(t, 5*time.Second, "nothing left to watch", func() bool { return f.svc.Waiting() == 0 })
}

// TestSubmitIngressDomain: with an ingress domain, each service's HTTP port gets the
// provider's hostname for it, and tenants may not name hosts under that domain.
func TestSubmitIngressDomain(t *testing.T) {
	f := newFixtureOf(t, Config{IngressDomain: "ingress.example.com"}, "aa-AI-Image-App_deploy")
	if err := f.svc.Submit(t.Context(), tenant, 7, f.m); err != nil {
		t.Fatal(err)
	}
	g := f.deploy.got[f.lease]
	var found bool
	for _, s := range g.Services {
		for _, e := range s.Expose {
			if e.IsIngress() {
				found = found || slices.Contains(e.Hosts, deploy.IngressHost(f.lease, s.Name, "ingress.example.com"))
			}
		}
	}
	if !found {
		t.Fatalf("no provider hostname in the manifest handed over: %+v", g)
	}
	if back := deploy.WithoutIngressHosts(f.lease, g, "ingress.example.com"); !reflect.DeepEqual(back, f.m[0]) {
		t.Fatalf("the tenant's manifest is not recoverable:\n%+v\n%+v", back, f.m[0])
	}
	for _, h := range []string{"ingress.example.com", "x.ingress.example.com", "X.Ingress.Example.com"} {
		hosted := mustDecode(t, f.m)
		hosted[0].Services[0].Expose[0].Hosts = []string{strings.ToLower(h)}
		if err := f.svc.Submit(t.Context(), tenant, 7, hosted); !errors.Is(err, ErrHostnameBlocked) {
			t.Fatalf("hostname %s: %v", h, err)
		}
	}
	if err := (Config{Provider: "akash1p", IngressDomain: "Not A Domain"}).Validate(); err == nil {
		t.Fatal("a bad ingress domain was accepted")
	}
}

// TestWatchdogAcrossRestarts: the time for a manifest runs from the lease's creation,
// not from the provider's start (a restart does not give a lease a new five minutes),
// with a grace at start for tenants retrying a manifest the provider could not take;
// and nothing is closed before the deployment manager knows the recorded manifests.
func TestWatchdogAcrossRestarts(t *testing.T) {
	f := newFixture(t, Config{Timeout: 5 * time.Minute})
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.svc.now, f.svc.started = func() time.Time { return now }, now
	f.ledger.genesis = now.Add(-time.Hour) // block h at now - 1 h + h s
	old := market.LeaseID{Owner: tenant, DSeq: 30, GSeq: 1, OSeq: 1, Provider: provider}
	recent := market.LeaseID{Owner: tenant, DSeq: 31, GSeq: 1, OSeq: 1, Provider: provider}
	unknown := market.LeaseID{Owner: tenant, DSeq: 32, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(t.Context(), old, 600)     // created 50 min ago: only the grace is left
	f.svc.LeaseWon(t.Context(), recent, 3540) // created 1 min ago: 4 min left
	f.svc.LeaseWon(t.Context(), unknown, 0)   // creation unknown: from now
	due := func(id market.LeaseID) time.Duration {
		f.svc.mu.Lock()
		defer f.svc.mu.Unlock()
		return f.svc.waiting[id].Sub(now)
	}
	for _, c := range []struct {
		id   market.LeaseID
		want time.Duration
	}{{old, StartGrace}, {recent, 4 * time.Minute}, {unknown, 5 * time.Minute}} {
		if got := due(c.id); got != c.want {
			t.Errorf("lease %d: due in %v, want %v", c.id.DSeq, got, c.want)
		}
	}
	// The ledger cannot say when the lease was made: the time runs from now.
	f.ledger.fail = errors.New("ledger down")
	failing := market.LeaseID{Owner: tenant, DSeq: 33, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(t.Context(), failing, 600)
	if got := due(failing); got != 5*time.Minute {
		t.Errorf("creation unknown: due in %v", got)
	}

	// Before the manager has rebuilt, a lease past its time is not closed: its
	// manifest may be recorded on the cluster.
	g := newFixture(t, Config{Timeout: time.Millisecond})
	g.deploy.started = make(chan struct{})
	g.svc.LeaseWon(t.Context(), g.lease, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The manager rebuilds and finds the manifest recorded before the restart.
	g.deploy.mu.Lock()
	g.deploy.got[g.lease] = g.m[0]
	g.deploy.mu.Unlock()
	close(g.deploy.started)
	late := market.LeaseID{Owner: tenant, DSeq: 34, GSeq: 1, OSeq: 1, Provider: provider}
	g.svc.LeaseWon(t.Context(), late, 0)
	testenv.Eventually(t, 5*time.Second, "the lease without a manifest closed", func() bool { _, ok := g.closer.reason(late.Bid()); return ok })
	if _, ok := g.closer.reason(g.lease.Bid()); ok {
		t.Fatal("a lease whose manifest was recorded before the restart was closed as manifest_timeout")
	}
}

// TestNoWatchdog: a timeout of 0 means no watchdog, as gateway.manifest_timeout's 0s
// does: a won lease is never waited for, so its bid is never closed for want of a
// manifest; a negative timeout is refused.
func TestNoWatchdog(t *testing.T) {
	f := newFixture(t, Config{})
	late := market.LeaseID{Owner: tenant, DSeq: 9, GSeq: 1, OSeq: 1, Provider: provider}
	f.svc.LeaseWon(t.Context(), late, 0)
	if n := f.svc.Waiting(); n != 0 {
		t.Fatalf("%d leases waited for without a watchdog", n)
	}
	if _, ok := f.closer.reason(late.Bid()); ok {
		t.Fatal("a bid closed without a watchdog")
	}
	cfg := Config{Provider: provider, Timeout: -time.Second}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "timeout -1s") {
		t.Fatalf("a negative timeout: %v, want refused", err)
	}
}

// TestFollowLeases: the watchdog follows the lease feed, from once the deployments are
// known (events wait meanwhile): a lease won is watched, one closed is not.
func TestFollowLeases(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Hour})
	f.deploy.started = make(chan struct{}) // the deployments are not known yet
	feed, err := leasefeed.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	follower, err := feed.Follow(leasefeed.Buffer)
	if err != nil {
		t.Fatal(err)
	}
	won := market.LeaseID{Owner: tenant, DSeq: 9, GSeq: 1, OSeq: 1, Provider: provider}
	closed := market.LeaseID{Owner: tenant, DSeq: 10, GSeq: 1, OSeq: 1, Provider: provider}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.svc.FollowLeases(ctx, follower) }()
	feed.Publish(leasefeed.Event{Won: &leasefeed.Won{Lease: won}})
	feed.Publish(leasefeed.Event{Won: &leasefeed.Won{Lease: closed}})
	feed.Publish(leasefeed.Event{Closed: &leasefeed.Closed{Lease: closed}})
	last := market.LeaseID{Owner: tenant, DSeq: 11, GSeq: 1, OSeq: 1, Provider: provider}
	feed.Publish(leasefeed.Event{Won: &leasefeed.Won{Lease: last}}) // handled after the others
	if n := f.svc.Waiting(); n != 0 {
		t.Fatalf("%d leases watched before the deployments are known", n)
	}
	close(f.deploy.started)
	watched := func(id market.LeaseID) bool {
		f.svc.mu.Lock()
		defer f.svc.mu.Unlock()
		_, ok := f.svc.waiting[id]
		return ok
	}
	testenv.Eventually(t, 5*time.Second, "the last lease won watched", func() bool { return watched(last) })
	if !watched(won) || watched(closed) || f.svc.Waiting() != 2 {
		t.Fatalf("watched: won %v, closed %v, %d in all; want the won and the last one only", watched(won), watched(closed), f.svc.Waiting())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
