package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/wait"
)

// ledgerCheckEvery is how often the provider asks its ledger node for its height.
const ledgerCheckEvery = 5 * time.Second

// ledgerWatch asks the ledger node for its height every few seconds and keeps
// whether it answered, for /status and the log: a node that goes away is reported
// once when it does and once when it is back, not with every failed call.
type ledgerWatch struct {
	height func(context.Context) (int64, error)
	every  time.Duration
	log    *slog.Logger

	mu   sync.Mutex
	cur  status.Ledger
	last int64 // the last height the node reported
}

func newLedgerWatch(node string, height func(context.Context) (int64, error), log *slog.Logger) *ledgerWatch {
	return &ledgerWatch{height: height, every: ledgerCheckEvery, log: log,
		cur: status.Ledger{Node: node, Reachable: true, Since: time.Now()}}
}

func (w *ledgerWatch) run(ctx context.Context) error {
	wait.Every(ctx, w.every, w.check)
	return nil
}

func (w *ledgerWatch) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, w.every)
	h, err := w.height(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.last = h
	}
	was := w.cur.Reachable
	w.cur.Reachable, w.cur.Error = err == nil, ""
	if err != nil {
		w.cur.Error = err.Error()
	}
	switch {
	case was && err != nil:
		w.cur.Since = time.Now()
		w.log.WarnContext(ctx, "the ledger node does not answer: bids, leases and withdrawals wait for it",
			slog.String("node", w.cur.Node), slog.String("error", err.Error()))
	case !was && err == nil:
		w.log.InfoContext(ctx, "the ledger node answers again", slog.String("node", w.cur.Node),
			slog.Duration("after", time.Since(w.cur.Since).Round(time.Millisecond)))
		w.cur.Since = time.Now()
	}
}

// latest is the last height the node reported (0 before the first check).
func (w *ledgerWatch) latest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *ledgerWatch) state() status.Ledger {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}
