// Package operator is what berth's operators share: a controller-runtime manager per
// operator process (leader election on a Lease, one shared cache, the HTTP endpoints
// Kubernetes and Prometheus expect: /healthz, /readyz, /metrics), and the rule that a
// controller runs only while its replica leads.
//
// An operator is its own process (`berth operator NAME`, one Deployment per provider)
// and is also run in-process by `berth dev`. Its controller is level-triggered: it
// reads the desired state from berth's resources and the observed state from the
// manager's cache, and converges; losing the lead stops it (a standby takes over), and
// an error ends Run so that the caller restarts it.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	berthv1 "berth.dev/berth/api/v1"
)

// Controller is an operator's reconciler, set up on the manager of its process.
type Controller interface {
	// Cache narrows what the manager's cache holds of each kind the controller
	// watches (its provider's objects only, slim copies): o.ByObject.
	Cache(o *cache.Options) error
	// Setup checks that the cluster serves what the controller needs and registers its
	// watches, indexes and runnables with mgr. It is called once per Run, with a new
	// manager each time.
	Setup(ctx context.Context, mgr manager.Manager) error
}

// Checker is a Controller that can be unready although its caches are synced.
type Checker interface {
	Ready() error
}

// LeaderElection configures the Lease replicas of one operator compete for.
type LeaderElection struct {
	// Disabled runs the controller at once, without a Lease (one replica only).
	Disabled bool `yaml:"disabled"`
	// Namespace and Name of the Lease (Name defaults to the operator's per-provider
	// name, so that providers sharing a cluster each have their own).
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// LeaseDuration, RenewDeadline and RetryPeriod as client-go's leader election
	// takes them (defaults 15 s, 10 s, 2 s).
	LeaseDuration time.Duration `yaml:"lease_duration"`
	RenewDeadline time.Duration `yaml:"renew_deadline"`
	RetryPeriod   time.Duration `yaml:"retry_period"`
}

// WithDefaults fills what is unset; name is the Lease's default name.
func (l LeaderElection) WithDefaults(name string) LeaderElection {
	if l.Namespace == "" {
		l.Namespace = DefaultNamespace
	}
	if l.Name == "" {
		l.Name = name
	}
	if l.LeaseDuration == 0 {
		l.LeaseDuration = 15 * time.Second
	}
	if l.RenewDeadline == 0 {
		l.RenewDeadline = 10 * time.Second
	}
	if l.RetryPeriod == 0 {
		l.RetryPeriod = 2 * time.Second
	}
	return l
}

// Validate checks the timings as client-go will.
func (l LeaderElection) Validate() error {
	if l.Disabled {
		return nil
	}
	switch {
	case l.Namespace == "" || l.Name == "":
		return errors.New("leader_election: namespace and name are required")
	case l.RetryPeriod <= 0:
		return errors.New("leader_election.retry_period must be positive")
	case l.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(l.RetryPeriod)):
		return fmt.Errorf("leader_election.renew_deadline %s must be over %.1f × retry_period %s", l.RenewDeadline, leaderelection.JitterFactor, l.RetryPeriod)
	case l.LeaseDuration <= l.RenewDeadline:
		return fmt.Errorf("leader_election.lease_duration %s must be over renew_deadline %s", l.LeaseDuration, l.RenewDeadline)
	}
	return nil
}

// DefaultNamespace is where operators run and keep their Leases.
const DefaultNamespace = "berth-system"

// Options are how Run runs one operator.
type Options struct {
	// Name is the operator's name ("hostname"): metrics label and log attribute.
	Name string
	// Listen is the address of /healthz, /readyz and /metrics ("" for none).
	Listen string
	// Identity names this replica in the Lease (default: host name and process ID).
	Identity       string
	LeaderElection LeaderElection
	// Resync is how often the cache delivers every object again, so that everything
	// is reconciled even without a change (default 10 minutes).
	Resync time.Duration
	// Registry collects the controller's metrics; Run adds berth_operator_leader.
	// /metrics serves it and controller-runtime's own (reconciles, work queues).
	Registry *prometheus.Registry
	Log      *slog.Logger
	// Started, when set, is called with the probe listener's address once it listens.
	Started func(addr string)
	// Handlers are more GET routes of the operator's own (path → handler) on Listen.
	Handlers map[string]http.Handler
}

// Scheme holds the kinds operators read typed: Kubernetes' own and berth's.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := berthv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// setLogger gives controller-runtime's global logger (used where no manager's is at
// hand) the first operator's log, without its name (berth dev runs three in one
// process); unset, controller-runtime complains on stderr.
var setLogger sync.Once

// Run serves the probes and metrics, waits to lead (unless leader election is
// disabled), and runs c while leading. It returns nil when ctx ends, and an error
// when c fails or the lead is lost (the replica's process should then exit or be
// restarted: its caches may be stale and another replica leads).
func Run(ctx context.Context, rc *rest.Config, o Options, c Controller) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Resync == 0 {
		o.Resync = 10 * time.Minute
	}
	le := o.LeaderElection
	if err := le.Validate(); err != nil {
		return err
	}
	var leading, synced atomic.Bool
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "berth_operator_leader", Help: "1 while this replica of the operator leads (runs its controller), 0 on standby.",
		ConstLabels: prometheus.Labels{"operator": o.Name},
	}, func() float64 {
		if leading.Load() {
			return 1
		}
		return 0
	})
	if err := o.Registry.Register(leader); err != nil {
		return fmt.Errorf("operator %s: metrics: %w", o.Name, err)
	}
	defer o.Registry.Unregister(leader)

	log := logr.FromSlogHandler(stopNoise{Handler: o.Log.With(slog.String("operator", o.Name)).Handler(), stopping: func() bool { return ctx.Err() != nil }})
	setLogger.Do(func() { ctrl.SetLogger(logr.FromSlogHandler(o.Log.Handler())) })
	cacheOpts := cache.Options{Scheme: Scheme, SyncPeriod: &o.Resync}
	if err := c.Cache(&cacheOpts); err != nil {
		return fmt.Errorf("operator %s: %w", o.Name, err)
	}
	mo := manager.Options{
		Scheme: Scheme, Logger: log, Cache: cacheOpts,
		Client:     client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:    metricsserver.Options{BindAddress: "0"}, // served on Listen with the probes
		Controller: config.Controller{SkipNameValidation: new(true)},
	}
	var lock *renewals
	if !le.Disabled {
		id := o.Identity
		if id == "" {
			host, _ := os.Hostname()
			id = fmt.Sprintf("%s_%d", host, os.Getpid())
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("operator %s: %w", o.Name, err)
		}
		inner, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name, cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
		if err != nil {
			return fmt.Errorf("operator %s: leader election: %w", o.Name, err)
		}
		lock = &renewals{Interface: inner}
		mo.LeaderElection, mo.LeaderElectionResourceLockInterface, mo.LeaderElectionReleaseOnCancel = true, lock, true
		mo.LeaderElectionID, mo.LeaderElectionNamespace = le.Name, le.Namespace
		mo.LeaseDuration, mo.RenewDeadline, mo.RetryPeriod = &le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod
	}
	mgr, err := manager.New(rc, mo)
	if err != nil {
		return fmt.Errorf("operator %s: %w", o.Name, err)
	}
	if err := c.Setup(ctx, mgr); err != nil {
		return fmt.Errorf("operator %s: %w", o.Name, err)
	}
	// Run while leading (or at once without leader election): marks the replica as
	// leading, and ready once the cache has synced.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		leading.Store(true)
		defer leading.Store(false)
		defer synced.Store(false)
		o.Log.InfoContext(ctx, "leading: the controller runs", slog.String("operator", o.Name))
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced.Store(true)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return fmt.Errorf("operator %s: %w", o.Name, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	probeErr := make(chan error, 1)
	if o.Listen != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("operator %s: probes and metrics: %w", o.Name, err)
		}
		ready := func() error {
			switch {
			case !leading.Load():
				return nil
			case !synced.Load():
				return errors.New("leading; the caches are not synced yet")
			}
			if ch, ok := c.(Checker); ok {
				return ch.Ready()
			}
			return nil
		}
		healthy := func() error {
			if lock == nil || !leading.Load() {
				return nil
			}
			return lock.check(le.LeaseDuration)
		}
		srv := &http.Server{Handler: probeMux(o, &leading, healthy, ready), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				probeErr <- fmt.Errorf("probe server: %w", err)
				cancel()
			}
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			shutdown, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer done()
			_ = srv.Shutdown(shutdown)
		}()
		if o.Started != nil {
			o.Started(ln.Addr().String())
		}
	}

	err = mgr.Start(ctx)
	cancel()
	wg.Wait()
	select {
	case perr := <-probeErr:
		err = errors.Join(err, perr)
	default:
	}
	switch {
	case err != nil && lock != nil:
		return fmt.Errorf("operator %s (Lease %s/%s): %w", o.Name, le.Namespace, le.Name, err)
	case err != nil:
		return fmt.Errorf("operator %s: %w", o.Name, err)
	}
	return nil
}

// renewals is the Lease lock, noting when this replica last renewed it (for
// /healthz).
type renewals struct {
	resourcelock.Interface
	mu      sync.Mutex
	renewed time.Time
	held    bool
}

// Update renews (or takes) the Lease.
func (r *renewals) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := r.Interface.Update(ctx, ler)
	r.record(err, ler)
	return err
}

// Create takes a Lease nobody holds.
func (r *renewals) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := r.Interface.Create(ctx, ler)
	r.record(err, ler)
	return err
}

func (r *renewals) record(err error, ler resourcelock.LeaderElectionRecord) {
	if err != nil || ler.HolderIdentity != r.Identity() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewed, r.held = time.Now(), true
}

// check fails when the leader has not renewed its Lease for two lease durations (the
// lease expired a lease duration ago: it cannot renew, and a standby may lead).
func (r *renewals) check(leaseDuration time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held && time.Since(r.renewed) > 2*leaseDuration {
		return fmt.Errorf("the Lease was last renewed %s ago", time.Since(r.renewed).Round(time.Second))
	}
	return nil
}

// probeMux serves /healthz (the process works and, when leading, renews its Lease),
// /readyz (a standby is ready; the leader when its controller is) and /metrics.
func probeMux(o Options, leading *atomic.Bool, healthy, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !leading.Load() {
			_, _ = fmt.Fprintln(w, "ok: standby")
			return
		}
		_, _ = fmt.Fprintln(w, "ok: leading")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{o.Registry, ctrlmetrics.Registry}, promhttp.HandlerOpts{}))
	for path, h := range o.Handlers {
		mux.Handle("GET "+path, h)
	}
	return mux
}

// stopNoise is the manager's log handler. At a deliberate stop the manager releases the
// leader-election lease (ReleaseOnCancel), and controller-runtime reports that as the
// error "leader election lost", received after the stop sequence was engaged; while the
// operator is stopping, that one record is logged at info as what it is. Every other
// record passes as it is (a lease lost while running ends Run with that error).
type stopNoise struct {
	slog.Handler
	stopping func() bool
}

// stopMessage is what controller-runtime's manager logs an error received while it
// stops with.
const stopMessage = "error received after stop sequence was engaged"

func (h stopNoise) Handle(ctx context.Context, r slog.Record) error {
	if r.Level != slog.LevelError || r.Message != stopMessage || !h.stopping() {
		return h.Handler.Handle(ctx, r)
	}
	lost := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && err.Error() == "leader election lost" {
			lost = true
		}
		return !lost
	})
	if !lost {
		return h.Handler.Handle(ctx, r)
	}
	if !h.Enabled(ctx, slog.LevelInfo) {
		return nil
	}
	return h.Handler.Handle(ctx, slog.NewRecord(r.Time, slog.LevelInfo, "leader election lease released at stop", r.PC))
}

func (h stopNoise) WithAttrs(as []slog.Attr) slog.Handler {
	return stopNoise{Handler: h.Handler.WithAttrs(as), stopping: h.stopping}
}

func (h stopNoise) WithGroup(name string) slog.Handler {
	return stopNoise{Handler: h.Handler.WithGroup(name), stopping: h.stopping}
}
