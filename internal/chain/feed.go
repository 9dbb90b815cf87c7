package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/wait"
)

// Feed delivers every block's events in height order, starting at a given height and
// following new blocks. The caller keeps the cursor: after handling block h it
// persists h, and restarts the feed at h+1.
type Feed struct {
	c    *Client
	next int64 // touched only by Run
}

// NewFeed returns a feed whose first block is from (at least 1).
func NewFeed(c *Client, from int64) *Feed {
	return &Feed{c: c, next: max(from, 1)}
}

// Run calls handle for each block from the feed's cursor on, waiting for new blocks
// when caught up, until ctx ends (nil) or handle fails (its error). A block is
// delivered again after a failed handle only if Run is called again.
func (f *Feed) Run(ctx context.Context, handle func(context.Context, ledger.Block) error) error {
	err := f.run(ctx, handle)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

func (f *Feed) run(ctx context.Context, handle func(context.Context, ledger.Block) error) error {
	// The pause before retrying after a node error (the node may be restarting),
	// longer each time.
	pause := wait.Backoff{First: 50 * time.Millisecond, Longest: 5 * time.Second}
	for {
		latest, err := f.c.WaitHeight(ctx, f.next)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if !pause.Sleep(ctx) {
				return ctx.Err()
			}
			continue
		}
		for f.next <= latest {
			b, err := f.read(ctx, f.next)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				if !pause.Sleep(ctx) {
					return ctx.Err()
				}
				break // and retry the same height
			}
			pause.Reset()
			if err := handle(ctx, b); err != nil {
				return fmt.Errorf("handle block %d: %w", b.Height, err)
			}
			f.next++
		}
	}
}

// read fetches one block's events.
func (f *Feed) read(ctx context.Context, h int64) (ledger.Block, error) {
	r, err := f.c.BlockResults(ctx, h)
	if err != nil {
		return ledger.Block{}, err
	}
	return blockFromResults(h, r.FinalizeBlockEvents, r.TxsResults), nil
}

// blockFromResults converts a block's results: block events first, then each
// successful transaction's events in order.
func blockFromResults(h int64, blockEvents []abci.Event, txs []*abci.ExecTxResult) ledger.Block {
	b := ledger.Block{Height: h, Events: convertEvents(blockEvents, -1)}
	for i, t := range txs {
		if t != nil && t.Code == 0 {
			b.Events = append(b.Events, convertEvents(t.Events, i)...)
		}
	}
	return b
}

func convertEvents(evs []abci.Event, txIndex int) []ledger.Event {
	out := make([]ledger.Event, 0, len(evs))
	for _, e := range evs {
		ev := ledger.Event{Type: e.Type, TxIndex: txIndex, Attrs: make(map[string]string, len(e.Attributes))}
		for _, a := range e.Attributes {
			ev.Attrs[a.Key] = a.Value
		}
		out = append(out, ev)
	}
	return out
}
