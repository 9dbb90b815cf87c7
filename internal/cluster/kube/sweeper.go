package kube

import (
	"context"
	"log/slog"
	"time"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/wait"
)

// Sweeper is the provider's periodic clean-up: every Every it hands the leases whose
// namespace remains but that the ledger no longer shows active to Close (RemoveOrphans;
// nil Close: a dry run, only logged), and, with FailedPodTTL, deletes the failed pods
// their ReplicaSets replaced (RemoveFailedPods). What it does and what it could not do
// are logged; nothing is retried sooner than the next pass.
type Sweeper struct {
	Deployer     *Deployer
	Active       deploy.LeaseActive
	Close        func(context.Context, market.LeaseID) error
	Every        time.Duration
	FailedPodTTL time.Duration // 0: failed pods are left
	Log          *slog.Logger
}

// Run sweeps once started is closed (the deployment manager has rebuilt: before that
// a lease it is about to restore could look orphaned), then every Every until ctx ends.
func (s *Sweeper) Run(ctx context.Context, started <-chan struct{}) error {
	select {
	case <-started:
	case <-ctx.Done():
		return nil
	}
	s.Sweep(ctx)
	wait.Every(ctx, s.Every, s.Sweep)
	return nil
}

// Sweep makes one pass.
func (s *Sweeper) Sweep(ctx context.Context) {
	orphans, err := s.Deployer.RemoveOrphans(ctx, s.Active, s.Close)
	for _, o := range orphans {
		s.Log.InfoContext(ctx, "orphan lease namespace", slog.String("namespace", o.Namespace), slog.String("lease", o.Lease.String()), slog.Bool("removed", o.Removed))
	}
	if err != nil && ctx.Err() == nil {
		s.Log.WarnContext(ctx, "orphan check incomplete", slog.String("error", err.Error()))
	}
	if s.FailedPodTTL <= 0 {
		return
	}
	removed, err := s.Deployer.RemoveFailedPods(ctx, s.FailedPodTTL)
	if len(removed) > 0 {
		s.Log.InfoContext(ctx, "failed pods removed (their ReplicaSets replaced them)", slog.Any("pods", removed))
	}
	if err != nil && ctx.Err() == nil {
		s.Log.WarnContext(ctx, "failed pods not all removed", slog.String("error", err.Error()))
	}
}
