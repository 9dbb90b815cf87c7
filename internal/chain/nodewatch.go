package chain

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"berth.dev/berth/internal/wait"
)

// nodeCheckEvery is how often a NodeWatch asks the node for its height (and how long
// it waits for the answer).
const nodeCheckEvery = 5 * time.Second

// NodeState is whether the ledger node answered its last check.
type NodeState struct {
	Node      string
	Reachable bool
	// Error is why the last check failed (empty when Reachable).
	Error string
	// Since is when Reachable last changed (or the watch started).
	Since time.Time
}

// NodeWatch asks a ledger node for its height every 5 s and keeps whether
// it answered: a node that goes away is logged once when it does and once when it is
// back, not with every failed call.
type NodeWatch struct {
	height func(context.Context) (int64, error)
	log    *slog.Logger

	mu   sync.Mutex
	cur  NodeState
	last int64 // the last height the node reported
}

// NewNodeWatch watches node (its address, for the state and the log) through height
// (Client.Height).
func NewNodeWatch(node string, height func(context.Context) (int64, error), log *slog.Logger) *NodeWatch {
	return &NodeWatch{height: height, log: log,
		cur: NodeState{Node: node, Reachable: true, Since: time.Now()}}
}

// Run checks the node until ctx ends.
func (w *NodeWatch) Run(ctx context.Context) error {
	wait.Every(ctx, nodeCheckEvery, w.check)
	return nil
}

func (w *NodeWatch) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, nodeCheckEvery)
	h, err := w.height(cctx)
	cancel()
	if ctx.Err() != nil {
		return // cut short by the caller stopping: says nothing about the node
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

// Latest is the last height the node reported (0 before the first check).
func (w *NodeWatch) Latest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// State is the node's state at the last check.
func (w *NodeWatch) State() NodeState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}
