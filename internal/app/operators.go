package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/kubeconfig"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
)

// Operator is one of berth's operators ready to run.
type Operator struct {
	rc   *rest.Config
	ctrl operator.Controller
	opts operator.Options
}

// operatorSpec is what tells one operator from another when it is built.
type operatorSpec struct {
	name               string // "hostname": its metrics label and Lease name
	kubeconfig, listen string
	provider, chainID  string
	leaderElection     operator.LeaderElection
	resync             time.Duration
	log                *slog.Logger
	started            func(addr string)
	controller         func(*prometheus.Registry) (operator.Controller, map[string]http.Handler, error)
}

// newOperator loads the cluster's configuration, makes the registry of the operator's
// metrics and builds its controller.
func newOperator(spec operatorSpec) (*Operator, error) {
	rc, err := kubeconfig.Load(spec.kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctrl, handlers, err := spec.controller(reg)
	if err != nil {
		return nil, err
	}
	le := spec.leaderElection.WithDefaults("berth-" + spec.name + "-" + shortHash(spec.provider+"/"+spec.chainID))
	return &Operator{rc: rc, ctrl: ctrl, opts: operator.Options{
		Name: spec.name, Listen: spec.listen, LeaderElection: le, Resync: spec.resync, Registry: reg, Log: spec.log, Started: spec.started, Handlers: handlers,
	}}, nil
}

// NewHostnameOperator checks cfg and loads the cluster's configuration; Run runs it.
// started (may be nil) gets the address of its probes and metrics.
func NewHostnameOperator(cfg hostname.Config, log *slog.Logger, started func(addr string)) (*Operator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, config.Invalid(fmt.Errorf("hostname operator: %w", err))
	}
	return newOperator(operatorSpec{name: "hostname", kubeconfig: cfg.Kubeconfig, listen: cfg.Listen, provider: cfg.Provider, chainID: cfg.ChainID,
		leaderElection: cfg.LeaderElection, resync: cfg.Resync, log: log, started: started,
		controller: func(reg *prometheus.Registry) (operator.Controller, map[string]http.Handler, error) {
			c, err := hostname.New(cfg, hostname.NewMetrics(reg), log)
			return c, nil, err
		}})
}

// NewIPOperator checks cfg and loads the cluster's configuration; Run runs it.
// Besides the probes and metrics it serves GET /usage.
func NewIPOperator(cfg ip.Config, log *slog.Logger, started func(addr string)) (*Operator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, config.Invalid(fmt.Errorf("IP operator: %w", err))
	}
	return newOperator(operatorSpec{name: "ip", kubeconfig: cfg.Kubeconfig, listen: cfg.Listen, provider: cfg.Provider, chainID: cfg.ChainID,
		leaderElection: cfg.LeaderElection, resync: cfg.Resync, log: log, started: started,
		controller: func(reg *prometheus.Registry) (operator.Controller, map[string]http.Handler, error) {
			c, err := ip.New(cfg, ip.NewMetrics(reg), log)
			if err != nil {
				return nil, nil, err
			}
			return c, map[string]http.Handler{"/usage": c.UsageHandler()}, nil
		}})
}

// NewInventoryOperator checks cfg and loads the cluster's configuration; Run runs
// it. Besides the probes and metrics it serves GET /inventory (its last report).
func NewInventoryOperator(cfg inventoryop.Config, log *slog.Logger, started func(addr string)) (*Operator, *inventoryop.Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, config.Invalid(fmt.Errorf("inventory operator: %w", err))
	}
	var ctrl *inventoryop.Controller
	op, err := newOperator(operatorSpec{name: "inventory", kubeconfig: cfg.Kubeconfig, listen: cfg.Listen, provider: cfg.Name,
		leaderElection: cfg.LeaderElection, resync: cfg.Resync, log: log, started: started,
		controller: func(reg *prometheus.Registry) (operator.Controller, map[string]http.Handler, error) {
			c, err := inventoryop.New(cfg, inventoryop.NewMetrics(reg), log)
			if err != nil {
				return nil, nil, err
			}
			ctrl = c
			return c, map[string]http.Handler{"/inventory": c.ReportHandler()}, nil
		}})
	return op, ctrl, err
}

// Run runs the operator until ctx ends or it fails (see operator.Run); it may be run
// again after it returns.
func (o *Operator) Run(ctx context.Context) error { return operator.Run(ctx, o.rc, o.opts, o.ctrl) }

// Close releases what the operator's controller holds beyond a run (the inventory
// operator's Redis client), once it will not be run again.
func (o *Operator) Close() error {
	if c, ok := o.ctrl.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// shortHash is 10 hex digits of s's SHA-256: a stable, DNS-safe name part.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}
