// Package onchain runs the bid engine on the ledger: it rebuilds the engine from the
// ledger, catches up on open orders, then follows the ledger's blocks (chain.Feed) from
// a persisted cursor, sends the engine's bids and bid closes (chain.Broadcaster), and
// publishes the leases won and closed. The engine itself (internal/bidengine) knows
// nothing of CometBFT or the network.
package onchain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/leasefeed"
	"berth.dev/berth/internal/wait"
)

// ProviderLinger is the broadcaster's linger the provider uses: long enough for a
// block's bids, decided in parallel, to go out in one transaction.
const ProviderLinger = 2 * time.Millisecond

// Sender sends messages in a transaction and waits for its inclusion
// (chain.Broadcaster.Submit).
type Sender interface {
	Submit(ctx context.Context, msgs ...ledger.Msg) (*chain.Result, error)
}

// ServiceConfig configures the run loop.
type ServiceConfig struct {
	// Cursor keeps the last handled height.
	Cursor *Cursor
	// Concurrency bounds the orders decided at once (default 32). Script pricing has
	// its own cap.
	Concurrency int
	// TickInterval is how often bid timeouts are checked (default 1 s).
	TickInterval time.Duration
	// Observe, when set, is called with each bid's latency from reading its order's
	// block to handing the bid to the broadcaster (berth_bid_latency_seconds records it
	// regardless).
	Observe func(time.Duration)
}

// Service is the bid engine's run loop: it rebuilds the engine from the ledger, catches
// up on open orders, then follows the ledger's blocks from its cursor, turning order
// events into bids and ledger events into bid lifecycle actions.
type Service struct {
	cfg    ServiceConfig
	engine *bidengine.Engine
	client *chain.Client
	sender Sender
	leases *leasefeed.Feed
	log    *slog.Logger

	latency prometheus.Histogram
	height  prometheus.Gauge

	ready chan struct{}
	sends sync.WaitGroup
}

// NewService builds the run loop; it starts nothing.
func NewService(cfg ServiceConfig, e *bidengine.Engine, c *chain.Client, s Sender, leases *leasefeed.Feed, log *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if cfg.Cursor == nil || e == nil || c == nil || s == nil || leases == nil || log == nil {
		return nil, errors.New("bid engine service: cursor, engine, client, sender, bus and logger are required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = time.Second
	}
	svc := &Service{
		cfg: cfg, engine: e, client: c, sender: s, leases: leases, log: log, ready: make(chan struct{}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_bid_latency_seconds",
			Help:    "Time from reading an order's block to handing its bid to the broadcaster.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10},
		}),
		height: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_bidengine_height",
			Help: "Last ledger height the bid engine handled.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{svc.latency, svc.height} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return svc, nil
}

// start rebuilds the engine from the ledger and catches up on the open orders; it
// returns the ledger's height and the height to follow events from.
func (s *Service) start(ctx context.Context) (now, from int64, err error) {
	if now, err = s.client.Height(ctx); err != nil {
		return 0, 0, fmt.Errorf("bid engine: %w", err)
	}
	from = now + 1
	if saved, ok, err := s.cfg.Cursor.Load(); err != nil {
		return 0, 0, err
	} else if ok {
		if saved > now {
			return 0, 0, fmt.Errorf("bid engine: the cursor is at height %d but the ledger at %d: is this the same chain? (delete the cursor file to start afresh)", saved, now)
		}
		from = saved + 1
	}
	for _, step := range []func(context.Context) error{s.refreshProvider, s.refreshAudits, s.rebuild, s.catchUp} {
		if err := step(ctx); err != nil {
			return 0, 0, err
		}
	}
	return now, from, nil
}

// Ready is closed once the engine is rebuilt from the ledger and has caught up on the
// open orders.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run works until ctx ends, and returns after every bid it sent has its outcome.
func (s *Service) Run(ctx context.Context) error {
	defer s.sends.Wait()
	now, from, err := s.start(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: not a failure
		}
		return err
	}
	s.log.InfoContext(ctx, "bid engine ready", slog.Int64("height", now), slog.Int64("resume_from", from))
	close(s.ready)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		wait.Every(ctx, s.cfg.TickInterval, s.tick)
		return nil
	})
	g.Go(func() error {
		return chain.NewFeed(s.client, from).Run(ctx, func(ctx context.Context, b ledger.Block) error {
			return s.handleBlock(ctx, b, b.Height <= now)
		})
	})
	return g.Wait()
}

// handleBlock applies a block's events, decides its new orders (in parallel), and
// then records the block as handled. replay marks blocks from before the start, whose
// orders may already carry a bid of ours from before the restart.
func (s *Service) handleBlock(ctx context.Context, b ledger.Block, replay bool) error {
	start := time.Now()
	acts := s.engine.Apply(b, start)
	s.act(ctx, acts)
	if err := s.decideAll(ctx, decisions(acts), start, replay); err != nil {
		return err
	}
	if err := s.cfg.Cursor.Save(b.Height); err != nil {
		return err
	}
	s.height.Set(float64(b.Height))
	return nil
}

// tick closes timed-out bids and decides again the orders declined while the
// inventory was not known, now that it is (those still open, without a bid of ours).
func (s *Service) tick(ctx context.Context) {
	start := time.Now()
	acts := s.engine.Tick(start)
	s.act(ctx, acts)
	ids := decisions(acts)
	if len(ids) == 0 {
		return
	}
	s.log.InfoContext(ctx, "deciding again the orders declined while the inventory was not known", slog.Int("orders", len(ids)))
	if err := s.decideAll(ctx, ids, start, true); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "orders declined while the inventory was not known: trying again in a moment", slog.Int("orders", len(ids)), slog.String("error", err.Error()))
		s.engine.Defer(start, ids...)
	}
}

// decisions are the orders acts asks to decide.
func decisions(acts []bidengine.Action) []market.OrderID {
	var ids []market.OrderID
	for _, a := range acts {
		if a.Kind == bidengine.ActDecide {
			ids = append(ids, a.Order)
		}
	}
	return ids
}

// decideAll reads the orders (one query per thousand) and decides them.
func (s *Service) decideAll(ctx context.Context, ids []market.OrderID, start time.Time, checkExisting bool) error {
	for len(ids) > 0 {
		n := min(len(ids), ledger.MaxOrderIDs)
		var r ledger.OrdersResponse
		if err := ledger.QueryOrders.Into(ctx, s.client, ledger.OrdersRequest{IDs: ids[:n]}, &r); err != nil {
			return fmt.Errorf("read %d new orders: %w", n, err)
		}
		if err := s.decideOrders(ctx, r.Orders, start, checkExisting); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// decideOrders decides orders in parallel and sends the bids.
func (s *Service) decideOrders(ctx context.Context, orders []ledger.Order, start time.Time, checkExisting bool) error {
	// Not errgroup.WithContext: its context ends with Wait, and the bids sent from
	// here outlive it.
	var g errgroup.Group
	g.SetLimit(s.cfg.Concurrency)
	for i := range orders {
		g.Go(func() error { return s.decide(ctx, &orders[i], start, checkExisting) })
	}
	return g.Wait()
}

func (s *Service) decide(ctx context.Context, o *ledger.Order, start time.Time, checkExisting bool) error {
	id := o.ID
	if checkExisting && o.State == ledger.OrderOpen {
		var b ledger.Bid
		err := ledger.QueryBid.Into(ctx, s.client, ledger.BidRequest{ID: id.Bid(s.engine.Provider())}, &b)
		if err == nil {
			return nil // we bid on it before the restart
		}
		if !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("bid on order %s: %w", id, err)
		}
	}
	msg, err := s.engine.Decide(ctx, *o, time.Now())
	if err != nil || msg == nil {
		return err
	}
	lat := time.Since(start)
	s.latency.Observe(lat.Seconds())
	if s.cfg.Observe != nil {
		s.cfg.Observe(lat)
	}
	s.sends.Go(func() {
		res, err := s.sender.Submit(ctx, msg)
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "bid placed", slog.String("order", id.String()), slog.String("price", msg.Price.String()), slog.Int64("height", res.Height))
		case ctx.Err() == nil:
			s.log.WarnContext(ctx, "bid not placed", slog.String("order", id.String()), slog.String("error", err.Error()))
		}
		if errors.Is(err, chain.ErrTimeout) {
			err = fmt.Errorf("%w: %w", bidengine.ErrNotIncluded, err)
		}
		s.engine.BidSent(id, err, time.Now())
	})
	return nil
}

// act carries out the engine's actions other than decisions.
func (s *Service) act(ctx context.Context, acts []bidengine.Action) {
	for _, a := range acts {
		var err error
		switch a.Kind {
		case bidengine.ActCloseBid:
			s.sends.Go(func() {
				_, err := s.sender.Submit(ctx, &ledger.MsgCloseBid{ID: a.Bid})
				// Already closed (the ledger closed it with its group) is fine.
				if err != nil && ctx.Err() == nil && !errors.Is(err, ledger.ErrInvalidState) && !errors.Is(err, ledger.ErrNotFound) {
					s.log.WarnContext(ctx, "close bid", slog.String("bid", a.Bid.String()), slog.String("error", err.Error()))
				}
			})
		case bidengine.ActPublishWon:
			s.log.InfoContext(ctx, "lease won", slog.String("lease", a.Won.Lease.String()), slog.String("price", a.Won.Price.String()))
			s.leases.Publish(leasefeed.Event{Won: a.Won})
		case bidengine.ActPublishClosed:
			s.log.InfoContext(ctx, "lease closed", slog.String("lease", a.Closed.Lease.String()), slog.String("reason", a.Closed.Reason))
			s.leases.Publish(leasefeed.Event{Closed: a.Closed})
		case bidengine.ActAdopt:
			err = s.adopt(ctx, a.Order.Bid(s.engine.Provider()).Lease(), false)
		case bidengine.ActRestoreBid:
			err = s.restoreBid(ctx, a.Bid)
		case bidengine.ActRefreshAudits:
			err = s.refreshAudits(ctx)
		case bidengine.ActRefreshProvider:
			err = s.refreshProvider(ctx)
		}
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "bid engine action failed", slog.Int("action", int(a.Kind)), slog.String("order", a.Order.String()), slog.String("error", err.Error()))
		}
	}
}

func (s *Service) adopt(ctx context.Context, id market.LeaseID, rebuilt bool) error {
	var l ledger.LeaseResponse
	if err := ledger.QueryLease.Into(ctx, s.client, ledger.LeaseRequest{ID: id}, &l); err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	if l.Lease.State != ledger.LeaseActive {
		return nil
	}
	var o ledger.Order
	if err := ledger.QueryOrder.Into(ctx, s.client, ledger.OrderRequest{ID: id.Order()}, &o); err != nil {
		return fmt.Errorf("order of lease %s: %w", id, err)
	}
	won, err := s.engine.Adopt(l.Lease, o.Spec, rebuilt, time.Now())
	if err != nil {
		return err
	}
	if won != nil {
		s.log.InfoContext(ctx, "lease adopted", slog.String("lease", won.Lease.String()), slog.Bool("at_start", rebuilt))
		s.leases.Publish(leasefeed.Event{Won: won})
	}
	return nil
}

func (s *Service) restoreBid(ctx context.Context, id market.BidID) error {
	var b ledger.Bid
	if err := ledger.QueryBid.Into(ctx, s.client, ledger.BidRequest{ID: id}, &b); err != nil {
		return fmt.Errorf("bid %s: %w", id, err)
	}
	if b.State != ledger.BidOpen {
		return nil
	}
	var o ledger.Order
	if err := ledger.QueryOrder.Into(ctx, s.client, ledger.OrderRequest{ID: id.Order()}, &o); err != nil {
		return fmt.Errorf("order of bid %s: %w", id, err)
	}
	return s.engine.RestoreBid(b, o.Spec, time.Now())
}

// rebuild takes back our open bids and active leases from the ledger.
func (s *Service) rebuild(ctx context.Context) error {
	me := s.engine.Provider()
	var bids, leases int
	err := ledger.List(ctx, s.client, ledger.QueryBids, ledger.BidsRequest{Provider: me, State: ledger.BidOpen, Page: ledger.Page{Limit: 200}},
		func(r ledger.BidsResponse) error {
			for i := range r.Bids {
				if err := s.restoreBid(ctx, r.Bids[i].ID); err != nil {
					return err
				}
				bids++
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("our open bids: %w", err)
	}
	err = ledger.List(ctx, s.client, ledger.QueryLeases, ledger.LeasesRequest{Provider: me, State: ledger.LeaseActive, Page: ledger.Page{Limit: 200}},
		func(r ledger.LeasesResponse) error {
			for i := range r.Leases {
				if err := s.adopt(ctx, r.Leases[i].Lease.ID, true); err != nil {
					return err
				}
				leases++
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("our active leases: %w", err)
	}
	s.log.InfoContext(ctx, "bid engine rebuilt from the ledger", slog.Int("open_bids", bids), slog.Int("active_leases", leases))
	return nil
}

// catchUp decides every open order we have not bid on: orders created while we were
// down, or before we first started.
func (s *Service) catchUp(ctx context.Context) error {
	start := time.Now()
	var n int
	err := ledger.List(ctx, s.client, ledger.QueryOrders, ledger.OrdersRequest{State: ledger.OrderOpen, Page: ledger.Page{Limit: 200}},
		func(r ledger.OrdersResponse) error {
			n += len(r.Orders)
			return s.decideOrders(ctx, r.Orders, start, true)
		})
	if err != nil {
		return fmt.Errorf("open orders: %w", err)
	}
	s.log.InfoContext(ctx, "bid engine caught up on open orders", slog.Int("orders", n), slog.Duration("took", time.Since(start)))
	return nil
}

func (s *Service) refreshProvider(ctx context.Context) error {
	var p ledger.Provider
	if err := ledger.QueryProvider.Into(ctx, s.client, ledger.ProviderRequest{Owner: s.engine.Provider()}, &p); err != nil {
		return fmt.Errorf("bid engine: our provider record (register with `berth provider register`): %w", err)
	}
	s.engine.SetAttributes(p.Attributes)
	return nil
}

func (s *Service) refreshAudits(ctx context.Context) error {
	var r ledger.AuditResponse
	if err := ledger.QueryAudit.Into(ctx, s.client, ledger.AuditRequest{Owner: s.engine.Provider()}, &r); err != nil {
		return fmt.Errorf("bid engine: auditor signatures: %w", err)
	}
	a := bidengine.Audits{}
	for _, rec := range r.Attributes {
		a[rec.Auditor] = rec.Attributes
	}
	s.engine.SetAudits(a)
	return nil
}
