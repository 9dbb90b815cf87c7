package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/market"
	"berth.dev/berth/internal/testenv"
)

// fakeDeployer is an in-memory cluster: what is deployed at which version, with
// failures injected per lease.
type fakeDeployer struct {
	mu       sync.Mutex
	running  map[market.LeaseID][]byte
	groups   map[market.LeaseID]market.ManifestGroup // what was applied last
	routes   map[market.LeaseID]Routes
	failures map[market.LeaseID]int // the next n calls for the lease fail
	down     int                    // the next n Deployed calls fail (API server down)
	calls    []string
}

func newFake() *fakeDeployer {
	return &fakeDeployer{running: map[market.LeaseID][]byte{}, groups: map[market.LeaseID]market.ManifestGroup{}, routes: map[market.LeaseID]Routes{}, failures: map[market.LeaseID]int{}}
}

func (f *fakeDeployer) fail(id market.LeaseID) error {
	if f.failures[id] > 0 {
		f.failures[id]--
		return errors.New("admission webhook refused the deployment")
	}
	return nil
}

func (f *fakeDeployer) Deploy(_ context.Context, id market.LeaseID, version []byte, g market.ManifestGroup, r Routes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("deploy %d v%d", id.DSeq, version[0]))
	if err := f.fail(id); err != nil {
		return err
	}
	f.running[id], f.groups[id], f.routes[id] = version, g, r
	return nil
}

func (f *fakeDeployer) routed(id market.LeaseID) (Routes, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.routes[id]
	return r, ok
}

func (f *fakeDeployer) Teardown(_ context.Context, id market.LeaseID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("teardown %d", id.DSeq))
	if err := f.fail(id); err != nil {
		return err
	}
	delete(f.running, id)
	return nil
}

func (f *fakeDeployer) Deployed(context.Context) ([]Deployed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down > 0 {
		f.down--
		return nil, errors.New("connection refused")
	}
	var out []Deployed
	for id, v := range f.running {
		out = append(out, Deployed{Lease: id, Version: v, Group: f.groups[id], Routes: f.routes[id]})
	}
	return out, nil
}

func (f *fakeDeployer) version(id market.LeaseID) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.running[id]
	return v, ok
}

func lease(dseq uint64) market.LeaseID {
	return market.LeaseID{Owner: "akash1tenant", DSeq: dseq, GSeq: 1, OSeq: 1, Provider: "akash1provider"}
}

func version(n byte) []byte { return bytes.Repeat([]byte{n}, 32) }

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}

func startManager(t *testing.T, f *fakeDeployer, active LeaseActive) *Manager {
	t.Helper()
	return startManagerWith(t, ManagerConfig{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}, f, active)
}

// startManagerWith runs a manager until the test ends and returns once it has started.
func startManagerWith(t *testing.T, cfg ManagerConfig, d Deployer, active LeaseActive) *Manager {
	t.Helper()
	m, err := NewManager(cfg, d, active, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-m.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("manager did not start")
	}
	return m
}

func state(m *Manager, id market.LeaseID) DeploymentState {
	for _, s := range m.States() {
		if s.Lease == id {
			return s
		}
	}
	return DeploymentState{}
}

func TestManagerRetriesUpdatesAndCloses(t *testing.T) {
	f := newFake()
	f.failures[lease(1)] = 1 << 30 // until the test lets it through
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	if err := m.ManifestReceived(lease(1), version(1), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	// Failing attempts are reported while the manager retries.
	eventuallyTrue(t, "the failure reported", func() bool { return state(m, lease(1)).Attempts > 2 })
	if s := state(m, lease(1)); s.Error == "" || s.Phase != PhaseDeploying {
		t.Fatalf("state %+v", s)
	}
	f.mu.Lock()
	f.failures[lease(1)] = 0
	f.mu.Unlock()
	eventuallyTrue(t, "deployed", func() bool { return state(m, lease(1)).Phase == PhaseDeployed })
	if v, _ := f.version(lease(1)); v[0] != 1 || state(m, lease(1)).Error != "" {
		t.Fatalf("running %x, state %+v", v, state(m, lease(1)))
	}
	// A deployed lease holds no goroutine; an update starts one and is applied in place.
	eventuallyTrue(t, "the worker stopped once deployed", func() bool { return !workerRunning(m, lease(1)) })
	if err := m.ManifestReceived(lease(1), version(2), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the update applied", func() bool { v, _ := f.version(lease(1)); return v[0] == 2 })
	eventuallyTrue(t, "the worker stopped again", func() bool { return !workerRunning(m, lease(1)) })
	// Closing tears it down, retrying too; a manifest after that does not bring it back.
	f.mu.Lock()
	f.failures[lease(1)] = 2
	f.mu.Unlock()
	m.LeaseClosed(lease(1))
	eventuallyTrue(t, "torn down", func() bool { _, ok := f.version(lease(1)); return !ok && len(m.States()) == 0 })
	if err := m.ManifestReceived(lease(1), version(3), market.ManifestGroup{}); !errors.Is(err, ErrLeaseClosed) {
		t.Fatalf("a manifest for a closed lease: %v, want ErrLeaseClosed", err)
	}
	if _, ok := f.version(lease(1)); ok || len(m.States()) != 0 {
		t.Fatal("a closed lease was deployed again")
	}
}

func workerRunning(m *Manager, id market.LeaseID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[id]
	return ok && w.running
}

func TestManagerRebuildsAfterRestart(t *testing.T) {
	f := newFake()
	f.running[lease(1)] = version(1) // still active
	f.running[lease(2)] = version(1) // closed while we were down
	f.running[lease(3)] = version(1) // the ledger cannot say
	f.down = 3                       // and the API server is down at first
	unreachable := errors.New("ledger unreachable")
	m := startManager(t, f, func(_ context.Context, id market.LeaseID) (bool, error) {
		switch id {
		case lease(2):
			return false, nil
		case lease(3):
			return false, unreachable
		}
		return true, nil
	})
	eventuallyTrue(t, "converged", func() bool {
		_, two := f.version(lease(2))
		return !two && state(m, lease(1)).Phase == PhaseDeployed && state(m, lease(3)).Phase == PhaseDeployed
	})
	if _, ok := f.version(lease(3)); !ok {
		t.Fatal("a lease the ledger could not answer for was torn down")
	}
	f.mu.Lock()
	calls := slices.Clone(f.calls)
	f.mu.Unlock()
	if !slices.Contains(calls, "deploy 1 v1") || !slices.Contains(calls, "teardown 2") || slices.Contains(calls, "teardown 3") {
		t.Fatalf("calls %v", calls)
	}
}

// TestManagerQueuesClosesBeforeRun: a lease closed before the manager has rebuilt is
// not lost: the rebuild tears it down rather than applying it again.
func TestManagerQueuesClosesBeforeRun(t *testing.T) {
	f := newFake()
	f.running[lease(1)], f.running[lease(2)] = version(1), version(1)
	m, err := NewManager(ManagerConfig{RetryMin: time.Millisecond}, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil },
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	m.LeaseClosed(lease(1))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = m.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	eventuallyTrue(t, "the closed lease torn down, the other applied again", func() bool {
		_, ok1 := f.version(lease(1))
		_, ok2 := f.version(lease(2))
		return !ok1 && ok2 && state(m, lease(2)).Phase == PhaseDeployed
	})
}

// gatedDeployer holds every Deploy until the gate opens, counting how many wait at once.
type gatedDeployer struct {
	*fakeDeployer
	gate     chan struct{}
	gmu      sync.Mutex
	in, most int
}

func (g *gatedDeployer) Deploy(ctx context.Context, id market.LeaseID, version []byte, group market.ManifestGroup, r Routes) error {
	g.gmu.Lock()
	g.in++
	g.most = max(g.most, g.in)
	g.gmu.Unlock()
	defer func() {
		g.gmu.Lock()
		g.in--
		g.gmu.Unlock()
	}()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fakeDeployer.Deploy(ctx, id, version, group, r)
}

// TestManagerBoundsConcurrency: a burst of leases is applied Concurrency at a time.
func TestManagerBoundsConcurrency(t *testing.T) {
	g := &gatedDeployer{fakeDeployer: newFake(), gate: make(chan struct{})}
	m := startManagerWith(t, ManagerConfig{RetryMin: time.Millisecond, Concurrency: 3}, g,
		func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	for i := range 10 {
		if err := m.ManifestReceived(lease(uint64(i+1)), version(1), market.ManifestGroup{}); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyTrue(t, "three leases applying", func() bool { g.gmu.Lock(); defer g.gmu.Unlock(); return g.in == 3 })
	close(g.gate)
	eventuallyTrue(t, "all ten deployed", func() bool {
		n := 0
		for _, s := range m.States() {
			if s.Phase == PhaseDeployed {
				n++
			}
		}
		return n == 10
	})
	g.gmu.Lock()
	defer g.gmu.Unlock()
	if g.most != 3 {
		t.Fatalf("%d leases applied at once; the limit is 3", g.most)
	}
	if _, err := NewManager(ManagerConfig{Concurrency: -1}, g, func(context.Context, market.LeaseID) (bool, error) { return true, nil }, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a negative concurrency was accepted")
	}
}

// appliedRoutes waits for the lease to be deployed and returns the routes it was
// applied with.
func appliedRoutes(t *testing.T, m *Manager, f *fakeDeployer, id market.LeaseID) Routes {
	t.Helper()
	var r Routes
	eventuallyTrue(t, "the lease applied", func() bool {
		var ok bool
		r, ok = f.routed(id)
		s, _ := m.State(id)
		return ok && s.Phase == PhaseDeployed
	})
	return r
}

// hosting is a group with one web service accepting hosts.
func hosting(hosts ...string) market.ManifestGroup {
	return market.ManifestGroup{Name: "web", Services: []market.Service{{Name: "web", Image: "nginx", Count: 1,
		Expose: []market.ServiceExpose{{Port: 80, Proto: market.ProtoTCP, Global: true, Hosts: hosts}}}}}
}

func TestManagerHostnames(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	a1 := lease(1)
	a1g2 := a1
	a1g2.GSeq = 2
	other := lease(2)
	other.Owner = "akash1other"
	routed := func(id market.LeaseID) []string { return appliedRoutes(t, m, f, id).Hosts }
	if err := m.ManifestReceived(a1, version(1), hosting("a.example.com", "b.example.com")); err != nil {
		t.Fatal(err)
	}
	if got := routed(a1); !slices.Equal(got, []string{"a.example.com", "b.example.com"}) {
		t.Fatalf("routed %v", got)
	}
	// Another tenant cannot take it, and is not told who holds it.
	err := m.ManifestReceived(other, version(1), hosting("b.example.com"))
	var he *HostnameError
	if !errors.As(err, &he) || !errors.Is(err, ErrHostnameInUse) || strings.Contains(err.Error(), a1.Owner) {
		t.Fatalf("another tenant's hostname: %v", err)
	}
	if _, _, ok := m.Manifest(other); ok {
		t.Fatal("a refused manifest was recorded")
	}
	// The same tenant's other deployment may list it: accepted, withheld (no route).
	a3 := lease(3)
	if err := m.ManifestReceived(a3, version(1), hosting("a.example.com", "c.example.com")); err != nil {
		t.Fatal(err)
	}
	if got := routed(a3); !slices.Equal(got, []string{"c.example.com"}) {
		t.Fatalf("withheld: routed %v", got)
	}
	// Migrating it moves the route: both leases are applied again.
	if _, err := m.MigrateHostnames(a1.Owner, []string{"d.example.com"}, 3, 1); !errors.Is(err, ErrMigration) {
		t.Fatalf("a hostname the destination does not list: %v", err)
	}
	if _, err := m.MigrateHostnames(a1.Owner, []string{"a.example.com"}, 9, 1); !errors.Is(err, ErrMigration) {
		t.Fatalf("no destination: %v", err)
	}
	if _, err := m.MigrateHostnames(other.Owner, []string{"a.example.com"}, 3, 1); !errors.Is(err, ErrMigration) {
		t.Fatalf("another tenant's destination: %v", err)
	}
	moved, err := m.MigrateHostnames(a1.Owner, []string{"a.example.com"}, 3, 1)
	if err != nil || !slices.Equal(moved, []string{"a.example.com"}) {
		t.Fatalf("migrate: %v %v", moved, err)
	}
	eventuallyTrue(t, "the routes moved", func() bool {
		r1, _ := f.routed(a1)
		r3, _ := f.routed(a3)
		return slices.Equal(r1.Hosts, []string{"b.example.com"}) && slices.Equal(r3.Hosts, []string{"a.example.com", "c.example.com"})
	})
	if _, g, _ := m.Manifest(a1); len(RoutesOf(&g).Hosts) != 2 {
		t.Fatal("the manifest a lease runs still lists its withheld hostnames")
	}
	// Another group of the same deployment may take one over (an update moving it).
	if err := m.ManifestReceived(a1g2, version(2), hosting("b.example.com")); err != nil {
		t.Fatal(err)
	}
	if h, _ := m.HostnameHolder("b.example.com"); h != a1g2 {
		t.Fatalf("b.example.com held by %v, want %v", h, a1g2)
	}
	// Closing hands it back to the tenant's lease still asking for it; once no lease
	// of the tenant asks for it, another tenant may use it.
	m.LeaseClosed(a1g2)
	if h, _ := m.HostnameHolder("b.example.com"); h != a1 {
		t.Fatalf("after the group closed, b.example.com held by %v, want %v", h, a1)
	}
	m.LeaseClosed(a1)
	if err := m.ManifestReceived(other, version(1), hosting("b.example.com")); err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	if v, g, ok := m.Manifest(other); !ok || v[0] != 1 || g.Services[0].Expose[0].Hosts[0] != "b.example.com" {
		t.Fatalf("Manifest(other) = %x %+v %v", v, g, ok)
	}
}

// ipGroup is a group with a web service on port 443 of leased IP endpoint name.
func ipGroup(name string) market.ManifestGroup {
	return market.ManifestGroup{Name: "web", Services: []market.Service{{Name: "web", Image: "nginx", Count: 1,
		Expose: []market.ServiceExpose{{Port: 443, Proto: market.ProtoTCP, Global: true, IP: name}}}}}
}

func TestManagerLeasedIPEndpoints(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	a1, a2 := lease(1), lease(2)
	other := lease(3)
	other.Owner = "akash1other"
	ips := func(id market.LeaseID) []IPPort { return appliedRoutes(t, m, f, id).IPs }
	for _, id := range []market.LeaseID{a1, a2, other} {
		if err := m.ManifestReceived(id, version(1), ipGroup("front")); err != nil {
			t.Fatal(err)
		}
	}
	want := []IPPort{{Endpoint: "front", Port: 443, Proto: market.ProtoTCP}}
	// The first deployment holds the tenant's "front" port 443; the second's is
	// withheld; another tenant's IPs are its own.
	if got := ips(a1); !slices.Equal(got, want) {
		t.Fatalf("first: %v", got)
	}
	if got := ips(a2); len(got) != 0 {
		t.Fatalf("second: %v, want withheld", got)
	}
	if got := ips(other); !slices.Equal(got, want) {
		t.Fatalf("another tenant: %v", got)
	}
	if _, err := m.MigrateEndpoints(a1.Owner, []string{"back"}, 2, 1); !errors.Is(err, ErrMigration) {
		t.Fatalf("an endpoint the destination does not expose: %v", err)
	}
	moved, err := m.MigrateEndpoints(a1.Owner, []string{"front"}, 2, 1)
	if err != nil || !slices.Equal(moved, []string{"front"}) {
		t.Fatalf("migrate: %v %v", moved, err)
	}
	eventuallyTrue(t, "the port moved", func() bool {
		r1, _ := f.routed(a1)
		r2, _ := f.routed(a2)
		return len(r1.IPs) == 0 && slices.Equal(r2.IPs, want)
	})
}

// TestManagerRoutesSurviveRestart: which deployment a hostname was routed to is read
// back from the cluster, so a restart does not hand it to another.
func TestManagerRoutesSurviveRestart(t *testing.T) {
	f := newFake()
	first, second := lease(1), lease(2)
	f.running[first], f.groups[first], f.routes[first] = version(1), hosting("a.example.com"), Routes{}
	f.running[second], f.groups[second], f.routes[second] = version(1), hosting("a.example.com"), Routes{Hosts: []string{"a.example.com"}}
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	if h, ok := m.HostnameHolder("a.example.com"); !ok || h != second {
		t.Fatalf("a.example.com held by %v, want %v", h, second)
	}
	eventuallyTrue(t, "both applied again", func() bool {
		s1, _ := m.State(first)
		s2, _ := m.State(second)
		return s1.Phase == PhaseDeployed && s2.Phase == PhaseDeployed
	})
	if r, _ := f.routed(first); len(r.Hosts) != 0 {
		t.Fatalf("the withheld hostname was routed to the first lease after a restart: %v", r)
	}
}

// TestManagerRefusesManifestsBeforeRebuild: until the manager has read what the cluster
// runs it cannot know who holds a hostname, so manifests wait (ErrStarting) rather than
// take a route from a lease about to be rebuilt.
func TestManagerRefusesManifestsBeforeRebuild(t *testing.T) {
	f := newFake()
	victim := lease(1)
	f.running[victim], f.groups[victim], f.routes[victim] = version(1), hosting("shop.example.com"), Routes{Hosts: []string{"shop.example.com"}}
	m, err := NewManager(ManagerConfig{RetryMin: time.Millisecond}, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	attacker := lease(2)
	attacker.Owner = "akash1attacker"
	if err := m.ManifestReceived(attacker, version(1), hosting("shop.example.com")); !errors.Is(err, ErrStarting) {
		t.Fatalf("a manifest before the rebuild: %v", err)
	}
	if _, err := m.MigrateHostnames(attacker.Owner, []string{"shop.example.com"}, 2, 1); !errors.Is(err, ErrStarting) {
		t.Fatalf("a migration before the rebuild: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-m.Started()
	if h, _ := m.HostnameHolder("shop.example.com"); h != victim {
		t.Fatalf("held by %v after the rebuild", h)
	}
	if err := m.ManifestReceived(attacker, version(1), hosting("shop.example.com")); !errors.Is(err, ErrHostnameInUse) {
		t.Fatalf("another tenant's hostname after the rebuild: %v", err)
	}
}

// TestManagerHandsOverFreedRoutes: when the deployment holding a hostname closes (or
// drops it), the tenant's deployment that had it withheld gets it, with no window for
// another tenant.
func TestManagerHandsOverFreedRoutes(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	blue, green := lease(1), lease(2)
	other := lease(3)
	other.Owner = "akash1other"
	for _, id := range []market.LeaseID{blue, green} {
		if err := m.ManifestReceived(id, version(1), hosting("www.example.com")); err != nil {
			t.Fatal(err)
		}
	}
	if h, _ := m.HostnameHolder("www.example.com"); h != blue {
		t.Fatalf("held by %v", h)
	}
	m.LeaseClosed(blue)
	if h, _ := m.HostnameHolder("www.example.com"); h != green {
		t.Fatalf("after the holder closed, held by %v, want %v", h, green)
	}
	if err := m.ManifestReceived(other, version(1), hosting("www.example.com")); !errors.Is(err, ErrHostnameInUse) {
		t.Fatalf("another tenant after the hand-over: %v", err)
	}
	eventuallyTrue(t, "the new holder applied with the route", func() bool {
		r, _ := f.routed(green)
		s, _ := m.State(green)
		return s.Phase == PhaseDeployed && slices.Equal(r.Hosts, []string{"www.example.com"})
	})
}
