// Package operator is what berth's operators share: leader election on a Lease, the
// HTTP endpoints Kubernetes and Prometheus expect (/healthz, /readyz, /metrics), and
// the rule that a controller runs only while its replica leads.
//
// An operator is its own process (`berth operator NAME`, one Deployment per provider)
// and is also run in-process by `berth dev`. Its controller is level-triggered: it
// reads the desired state from berth's resources and the observed state from the
// cluster through informers, and converges; losing the lead stops it (a standby takes
// over), and an error ends Run so that the caller restarts it.
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Controller is an operator's reconciler.
type Controller interface {
	// Run reconciles until ctx ends (nil) or it cannot go on (an error).
	Run(ctx context.Context) error
	// Ready reports whether it serves: its caches are synced and it is not failing.
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
	// Registry collects the controller's metrics; Run adds berth_operator_leader.
	Registry *prometheus.Registry
	Log      *slog.Logger
	// Started, when set, is called with the probe listener's address once it listens.
	Started func(addr string)
	// Handlers are more GET routes of the operator's own (path → handler) on Listen.
	Handlers map[string]http.Handler
}

// Run serves the probes and metrics, waits to lead (unless leader election is
// disabled), and runs c while leading. It returns nil when ctx ends, and an error
// when c fails or the lead is lost (the replica's process should then exit or be
// restarted: its caches may be stale and another replica leads).
func Run(ctx context.Context, cs kubernetes.Interface, o Options, c Controller) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	le := o.LeaderElection
	if err := le.Validate(); err != nil {
		return err
	}
	var leading atomic.Bool
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

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	var elector *leaderelection.LeaderElector
	var healthz *leaderelection.HealthzAdaptor
	runErr := make(chan error, 1)
	fail := func(err error) {
		select {
		case runErr <- err:
		default: // the first error is the one reported
		}
		cancel()
	}
	// client-go starts OnStartedLeading in a goroutine it does not wait for: once the
	// elector returns, stopped keeps a late start from running, and Run waits for
	// ctrlDone of one that started.
	var ctrlMu sync.Mutex
	var stopped bool
	var ctrlDone chan struct{}
	runController := func(ctx context.Context) {
		ctrlMu.Lock()
		if stopped {
			ctrlMu.Unlock()
			return
		}
		done := make(chan struct{})
		ctrlDone = done
		ctrlMu.Unlock()
		defer close(done)
		leading.Store(true)
		defer leading.Store(false)
		o.Log.InfoContext(ctx, "leading: the controller runs", slog.String("operator", o.Name))
		err := c.Run(ctx)
		if err == nil && ctx.Err() == nil {
			err = errors.New("the controller stopped on its own")
		}
		if err != nil && ctx.Err() == nil {
			fail(err)
		}
	}
	if !le.Disabled {
		id := o.Identity
		if id == "" {
			host, _ := os.Hostname()
			id = fmt.Sprintf("%s_%d", host, os.Getpid())
		}
		healthz = leaderelection.NewLeaderHealthzAdaptor(le.LeaseDuration)
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		var err error
		elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			ReleaseOnCancel: true, Name: o.Name, WatchDog: healthz,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: runController,
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						fail(fmt.Errorf("lost the lead of Lease %s/%s", le.Namespace, le.Name))
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("operator %s: leader election: %w", o.Name, err)
		}
	}

	if o.Listen != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("operator %s: probes and metrics: %w", o.Name, err)
		}
		srv := &http.Server{Handler: probeMux(o, c, &leading, healthz), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fail(fmt.Errorf("probe server: %w", err))
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

	if elector == nil {
		runController(ctx)
	} else {
		// Run returns once the lead is lost or ctx ends; the Lease is released then.
		elector.Run(ctx)
	}
	ctrlMu.Lock()
	stopped = true
	done := ctrlDone
	ctrlMu.Unlock()
	if done != nil {
		<-done
	}
	select {
	case err := <-runErr:
		return fmt.Errorf("operator %s: %w", o.Name, err)
	default:
		return nil
	}
}

// probeMux serves /healthz (the process works and, when leading, renews its Lease),
// /readyz (a standby is ready; the leader when its controller is) and /metrics.
func probeMux(o Options, c Controller, leading *atomic.Bool, healthz *leaderelection.HealthzAdaptor) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if healthz != nil {
			if err := healthz.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !leading.Load() {
			_, _ = fmt.Fprintln(w, "ok: standby")
			return
		}
		if err := c.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok: leading")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}))
	for path, h := range o.Handlers {
		mux.Handle("GET "+path, h)
	}
	return mux
}
