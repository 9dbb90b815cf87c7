package deploy

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

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/leasefeed"
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
	// recorded are the durable records (Record); recordFailures fails the next n
	// Record calls of a lease.
	recorded       map[market.LeaseID]Deployed
	recordFailures map[market.LeaseID]int
}

func newFake() *fakeDeployer {
	return &fakeDeployer{running: map[market.LeaseID][]byte{}, groups: map[market.LeaseID]market.ManifestGroup{}, routes: map[market.LeaseID]Routes{}, failures: map[market.LeaseID]int{},
		recorded: map[market.LeaseID]Deployed{}, recordFailures: map[market.LeaseID]int{}}
}

func (f *fakeDeployer) Record(_ context.Context, id market.LeaseID, version []byte, g market.ManifestGroup, r Routes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("record %d v%d", id.DSeq, version[0]))
	if f.recordFailures[id] > 0 {
		f.recordFailures[id]--
		return errors.New("connection refused")
	}
	f.recorded[id] = Deployed{Lease: id, Version: version, Group: g, Routes: r}
	return nil
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
	testenv.Go(t, m.Run)
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
	if err := m.ManifestReceived(t.Context(), lease(1), version(1), market.ManifestGroup{}); err != nil {
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
	// An update is applied in place.
	if err := m.ManifestReceived(t.Context(), lease(1), version(2), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the update applied", func() bool { v, _ := f.version(lease(1)); return v[0] == 2 })
	// Closing tears it down, retrying too; a manifest after that does not bring it back.
	f.mu.Lock()
	f.failures[lease(1)] = 2
	f.mu.Unlock()
	m.LeaseClosed(lease(1))
	eventuallyTrue(t, "torn down", func() bool { _, ok := f.version(lease(1)); return !ok && len(m.States()) == 0 })
	if err := m.ManifestReceived(t.Context(), lease(1), version(3), market.ManifestGroup{}); !errors.Is(err, ErrLeaseClosed) {
		t.Fatalf("a manifest for a closed lease: %v, want ErrLeaseClosed", err)
	}
	if _, ok := f.version(lease(1)); ok || len(m.States()) != 0 {
		t.Fatal("a closed lease was deployed again")
	}
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
		if err := m.ManifestReceived(t.Context(), lease(uint64(i+1)), version(1), market.ManifestGroup{}); err != nil {
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
	if err := m.ManifestReceived(t.Context(), a1, version(1), hosting("a.example.com", "b.example.com")); err != nil {
		t.Fatal(err)
	}
	if got := routed(a1); !slices.Equal(got, []string{"a.example.com", "b.example.com"}) {
		t.Fatalf("routed %v", got)
	}
	// Another tenant cannot take it, and is not told who holds it.
	err := m.ManifestReceived(t.Context(), other, version(1), hosting("b.example.com"))
	var he *HostnameError
	if !errors.As(err, &he) || !errors.Is(err, ErrHostnameInUse) || strings.Contains(err.Error(), a1.Owner) {
		t.Fatalf("another tenant's hostname: %v", err)
	}
	if _, _, ok := m.Manifest(other); ok {
		t.Fatal("a refused manifest was recorded")
	}
	// The same tenant's other deployment may list it: accepted, withheld (no route).
	a3 := lease(3)
	if err := m.ManifestReceived(t.Context(), a3, version(1), hosting("a.example.com", "c.example.com")); err != nil {
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
	if err := m.ManifestReceived(t.Context(), a1g2, version(2), hosting("b.example.com")); err != nil {
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
	if err := m.ManifestReceived(t.Context(), other, version(1), hosting("b.example.com")); err != nil {
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
		if err := m.ManifestReceived(t.Context(), id, version(1), ipGroup("front")); err != nil {
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
	if err := m.ManifestReceived(t.Context(), attacker, version(1), hosting("shop.example.com")); !errors.Is(err, ErrStarting) {
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
	if err := m.ManifestReceived(t.Context(), attacker, version(1), hosting("shop.example.com")); !errors.Is(err, ErrHostnameInUse) {
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
		if err := m.ManifestReceived(t.Context(), id, version(1), hosting("www.example.com")); err != nil {
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
	if err := m.ManifestReceived(t.Context(), other, version(1), hosting("www.example.com")); !errors.Is(err, ErrHostnameInUse) {
		t.Fatalf("another tenant after the hand-over: %v", err)
	}
	eventuallyTrue(t, "the new holder applied with the route", func() bool {
		r, _ := f.routed(green)
		s, _ := m.State(green)
		return s.Phase == PhaseDeployed && slices.Equal(r.Hosts, []string{"www.example.com"})
	})
}

// TestManagerRecordsBeforeAccepting: a manifest is accepted only once its record is
// durable; one the cluster does not take changes nothing and asks for it again.
func TestManagerRecordsBeforeAccepting(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	f.mu.Lock()
	f.recordFailures[lease(1)] = 1
	f.mu.Unlock()
	err := m.ManifestReceived(t.Context(), lease(1), version(1), market.ManifestGroup{})
	if !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("a manifest the cluster did not record: %v, want ErrNotRecorded", err)
	}
	if _, _, ok := m.Manifest(lease(1)); ok {
		t.Fatal("a manifest that was not recorded is run")
	}
	if err := m.ManifestReceived(t.Context(), lease(1), version(1), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	rec, ok := f.recorded[lease(1)]
	f.mu.Unlock()
	if !ok || rec.Version[0] != 1 {
		t.Fatalf("accepted without a record: %+v", rec)
	}
	// Several leases of a deployment: those recorded before a failure keep their
	// manifest (it is the deployment's current version); the answer asks for it again.
	two := lease(2)
	two.GSeq = 2
	f.mu.Lock()
	f.recordFailures[two] = 1
	f.mu.Unlock()
	err = m.ManifestsReceived(t.Context(), version(2), []LeaseManifest{{Lease: lease(2)}, {Lease: two}})
	if !errors.Is(err, ErrNotRecorded) || !strings.Contains(err.Error(), two.String()) {
		t.Fatalf("partly recorded: %v", err)
	}
	if v, _, ok := m.Manifest(lease(2)); !ok || v[0] != 2 {
		t.Fatal("a recorded lease lost its manifest")
	}
	if _, _, ok := m.Manifest(two); ok {
		t.Fatal("an unrecorded lease runs a manifest")
	}
}

// slowRecorder holds each Record until release says so.
type slowRecorder struct {
	*fakeDeployer
	entered chan market.LeaseID
	release chan struct{}
}

func (s *slowRecorder) Record(ctx context.Context, id market.LeaseID, version []byte, g market.ManifestGroup, r Routes) error {
	s.entered <- id
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.fakeDeployer.Record(ctx, id, version, g, r)
}

// TestManagerAcceptanceRaces: while one tenant's manifest naming a hostname is being
// recorded, another tenant cannot be given it; two manifests of one lease are taken
// one after the other, and the last recorded is the one run; a lease closed while its
// manifest is recorded is torn down (the record may have re-created its namespace).
func TestManagerAcceptanceRaces(t *testing.T) {
	s := &slowRecorder{fakeDeployer: newFake(), entered: make(chan market.LeaseID, 4), release: make(chan struct{})}
	m := startManagerWith(t, ManagerConfig{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}, s,
		func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	first := make(chan error, 1)
	go func() { first <- m.ManifestReceived(t.Context(), lease(1), version(1), hosting("shop.example.com")) }()
	<-s.entered
	rival := lease(2)
	rival.Owner = "akash1rival"
	if err := m.ManifestReceived(t.Context(), rival, version(1), hosting("shop.example.com")); !errors.Is(err, ErrHostnameInUse) {
		t.Fatalf("another tenant during the record: %v", err)
	}
	// A second manifest for the same lease waits for the first.
	second := make(chan error, 1)
	go func() { second <- m.ManifestReceived(t.Context(), lease(1), version(2), hosting("shop.example.com")) }()
	select {
	case id := <-s.entered:
		t.Fatalf("a second record of %v began during the first", id)
	case <-time.After(50 * time.Millisecond): // only to give a wrong implementation the chance to show itself
	}
	s.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-s.entered
	s.release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if v, _, _ := m.Manifest(lease(1)); v[0] != 2 {
		t.Fatalf("runs version %d after versions 1 then 2", v[0])
	}
	// Closed while being recorded: the teardown waits for the record (which may have
	// made the namespace), then runs.
	third := make(chan error, 1)
	go func() { third <- m.ManifestReceived(t.Context(), lease(3), version(1), market.ManifestGroup{}) }()
	<-s.entered
	m.LeaseClosed(lease(3))
	s.release <- struct{}{}
	if err := <-third; !errors.Is(err, ErrLeaseClosed) {
		t.Fatalf("a lease closed during its record: %v", err)
	}
	eventuallyTrue(t, "torn down after its record", func() bool { _, ok := m.State(lease(3)); return !ok })
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, tear := slices.Index(s.calls, "record 3 v1"), slices.Index(s.calls, "teardown 3")
	if rec < 0 || tear < rec {
		t.Fatalf("calls %v: the teardown must follow the record", s.calls)
	}
}

// heldDeployer holds each Deploy of one lease until released, and writes the record
// as the real deployer does (the Manifest resource, from the group it applies).
type heldDeployer struct {
	*fakeDeployer
	hold     market.LeaseID
	entered  chan []byte
	released chan struct{}
}

func (h *heldDeployer) Deploy(ctx context.Context, id market.LeaseID, v []byte, g market.ManifestGroup, r Routes) error {
	if id == h.hold {
		h.entered <- v
		select {
		case <-h.released:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.mu.Lock()
	h.recorded[id] = Deployed{Lease: id, Version: v, Group: g, Routes: r}
	h.mu.Unlock()
	return h.fakeDeployer.Deploy(ctx, id, v, g, r)
}

// TestManagerNewerRecordNotOverwritten: a manifest accepted while the lease is being
// applied with the one before is recorded after that apply, so the older one cannot
// be written over it (found by the chaos suite: the provider killed just after, the
// next start ran the older manifest, though the tenant had been told the newer one
// was durable).
func TestManagerNewerRecordNotOverwritten(t *testing.T) {
	h := &heldDeployer{fakeDeployer: newFake(), hold: lease(1), entered: make(chan []byte, 4), released: make(chan struct{})}
	m := startManagerWith(t, ManagerConfig{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}, h,
		func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	if err := m.ManifestReceived(t.Context(), lease(1), version(1), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	if v := <-h.entered; v[0] != 1 {
		t.Fatalf("applying version %d", v[0])
	}
	// Version 1 is being applied; version 2 arrives.
	accepted := make(chan error, 1)
	go func() { accepted <- m.ManifestReceived(t.Context(), lease(1), version(2), market.ManifestGroup{}) }()
	h.released <- struct{}{} // the apply of version 1 ends (writing its record)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	got := h.recorded[lease(1)].Version[0]
	h.mu.Unlock()
	if got != 2 {
		t.Fatalf("after version 2 was accepted, the record holds version %d", got)
	}
	// Version 2 is applied next.
	if v := <-h.entered; v[0] != 2 {
		t.Fatalf("then applying version %d", v[0])
	}
	h.released <- struct{}{}
	eventuallyTrue(t, "version 2 deployed", func() bool {
		s, _ := m.State(lease(1))
		return s.Phase == PhaseDeployed && s.Version[0] == 2
	})
}

// TestManagerRepairsDrift: a lease whose objects drifted is synced again, and one
// whose sync keeps failing is retried with backoff until it converges.
func TestManagerRepairsDrift(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	if err := m.ManifestReceived(t.Context(), lease(1), version(1), market.ManifestGroup{}); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "deployed", func() bool { return state(m, lease(1)).Phase == PhaseDeployed })
	deploys := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, c := range f.calls {
			if strings.HasPrefix(c, "deploy 1 ") {
				n++
			}
		}
		return n
	}
	before := deploys()
	// Someone deleted the lease's objects: the cluster no longer runs it.
	f.mu.Lock()
	delete(f.running, lease(1))
	f.failures[lease(1)] = 2
	f.mu.Unlock()
	if !m.Drifted(lease(1)) {
		t.Fatal("a deployed lease's drift queued nothing")
	}
	eventuallyTrue(t, "restored", func() bool { _, ok := f.version(lease(1)); return ok })
	if n := deploys() - before; n != 3 {
		t.Fatalf("%d syncs after the drift; want 3 (two failing, then one)", n)
	}
	if m.Drifted(lease(9)) {
		t.Fatal("a lease the manager does not run was synced")
	}
}

// TestManagerFollowsTheLeaseFeed: a lease the feed says closed is torn down; a won
// lease changes nothing here (its manifest brings it); a follower cut off says so, and
// goes on with what comes next.
func TestManagerFollowsTheLeaseFeed(t *testing.T) {
	f := newFake()
	m := startManager(t, f, func(context.Context, market.LeaseID) (bool, error) { return true, nil })
	for _, id := range []market.LeaseID{lease(1), lease(2), lease(3)} {
		if err := m.ManifestReceived(t.Context(), id, version(1), market.ManifestGroup{}); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyTrue(t, "three leases deployed", func() bool {
		_, a := f.version(lease(1))
		_, b := f.version(lease(2))
		_, c := f.version(lease(3))
		return a && b && c
	})

	feed, err := leasefeed.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	follower, err := feed.Follow(2)
	if err != nil {
		t.Fatal(err)
	}
	feed.Publish(leasefeed.Event{Won: &leasefeed.Won{Lease: lease(4)}})
	feed.Publish(leasefeed.Event{Closed: &leasefeed.Closed{Lease: lease(1)}})
	feed.Publish(leasefeed.Event{Closed: &leasefeed.Closed{Lease: lease(2)}}) // over the buffer: lost
	lost := make(chan error, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.FollowLeases(ctx, follower, func(err error) { lost <- err }) }()
	if err := <-lost; !errors.Is(err, bus.ErrOverflow) {
		t.Fatalf("lost with %v; want an overflow", err)
	}
	feed.Publish(leasefeed.Event{Closed: &leasefeed.Closed{Lease: lease(3)}})
	eventuallyTrue(t, "leases 1 and 3 torn down", func() bool {
		_, one := f.version(lease(1))
		_, three := f.version(lease(3))
		return !one && !three
	})
	if _, ok := f.version(lease(2)); !ok {
		t.Fatal("lease 2, whose close was lost, was torn down (the orphan check is what finds it)")
	}
	if _, ok := f.version(lease(4)); ok {
		t.Fatal("a won lease was deployed without a manifest")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
