package balance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
)

// tally adds up a withdrawal as its transactions succeed.
type tally struct {
	w      Withdrawal
	amount map[string]uint64
}

// txOverhead bounds a transaction's size beyond its messages (as the broadcaster
// counts it: envelope, key, signature, signer, memo), msgOverhead a message's beyond
// its type and value.
const (
	txOverhead  = 2048
	msgOverhead = 32
)

// batchSize is how many withdrawals of cands fit in one transaction: at most
// max_msgs_per_tx, and max_tx_bytes.
func batchSize(p ledger.Params, cands []candidate) int {
	per := max(int(p.MaxMsgsPerTx), 1)
	largest := 0
	for _, cand := range cands {
		if em, err := ledger.EncodeMsg(&ledger.MsgWithdrawLease{ID: cand.id}); err == nil {
			largest = max(largest, len(em.Type)+len(em.Value)+msgOverhead)
		}
	}
	if largest > 0 {
		room := int(p.MaxTxBytes) - txOverhead
		per = min(per, max(room/largest, 1))
	}
	return per
}

// withdraw sends MsgWithdrawLease for each candidate, as few transactions as the
// ledger's limits allow. The batches go on after one fails, unless ctx ends.
func (c *Checker) withdraw(ctx context.Context, reason string, cands []candidate) (Withdrawal, error) {
	per := batchSize(c.ledger.Params(), cands)
	t := tally{w: Withdrawal{Reason: reason, Leases: []market.LeaseID{}}, amount: map[string]uint64{}}
	var errs []error
	for start := 0; start < len(cands); start += per {
		batch := cands[start:min(start+per, len(cands))]
		if err := c.sendBatch(ctx, batch, &t); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	t.w.Amount = coins(t.amount)
	return t.w, errors.Join(errs...)
}

// sendBatch withdraws a batch in one transaction. A lease that closed since it was
// listed fails the transaction (invalid_state): the batch's leases are then read again
// and the ones still active sent again. Each retry has fewer leases, so it ends.
func (c *Checker) sendBatch(ctx context.Context, batch []candidate, t *tally) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("withdraw %d lease(s): %w", len(batch), err)
		}
		msgs := make([]ledger.Msg, len(batch))
		for i := range batch {
			msgs[i] = &ledger.MsgWithdrawLease{ID: batch[i].id}
		}
		res, err := c.broadcast(ctx, msgs)
		if err == nil {
			c.m.withdrawals.WithLabelValues(outcomeOK).Inc()
			c.m.withdrawnLeases.Add(float64(len(batch)))
			c.recordWithdrawal(ctx, res, batch, t)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("withdraw %d lease(s): %w", len(batch), err)
		}
		c.m.withdrawals.WithLabelValues(outcomeError).Inc()
		if !errors.Is(err, ledger.ErrInvalidState) {
			return fmt.Errorf("withdraw %d lease(s): %w", len(batch), err)
		}
		still, rerr := c.stillActive(ctx, batch)
		if rerr != nil {
			return fmt.Errorf("withdraw %d lease(s): %w (reading them again: %w)", len(batch), err, rerr)
		}
		if len(still) == len(batch) {
			return fmt.Errorf("withdraw %d lease(s), all still active: %w", len(batch), err)
		}
		c.log.InfoContext(ctx, "leases closed before their withdrawal; sending the others again",
			slog.Int("closed", len(batch)-len(still)), slog.Int("others", len(still)))
		t.w.Closed += len(batch) - len(still)
		if len(still) == 0 {
			return nil
		}
		batch = still
	}
}

// withdrawTimeout bounds one withdrawal transaction, sent and awaited, once it has
// started (the broadcaster's own inclusion timeout, 30 s by default, comes first).
const withdrawTimeout = time.Minute

// broadcast sends msgs and waits for their block even when ctx ends meanwhile (up to
// withdrawTimeout). A transaction the node has taken goes into a block whether anyone
// waits or not; given up at shutdown, what it paid out would be neither recorded, nor
// published, nor saved before Run returns, and the earnings file and status would stay
// short of the ledger until a check reads the lease again (at the next start).
func (c *Checker) broadcast(ctx context.Context, msgs []ledger.Msg) (*chain.Result, error) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), withdrawTimeout)
	defer cancel()
	return c.bc.Broadcast(bctx, msgs...)
}

// stillActive reads each lease of a batch again (recording the final payout of the
// closed ones) and returns those still active.
func (c *Checker) stillActive(ctx context.Context, batch []candidate) ([]candidate, error) {
	out := make([]candidate, 0, len(batch))
	for _, cand := range batch {
		r, err := c.readLease(ctx, cand.id)
		if err != nil {
			return nil, err
		}
		if r.Lease.State != ledger.LeaseActive {
			continue
		}
		if fresh, ok := candidateOf(&r); ok {
			cand = fresh
		}
		out = append(out, cand)
	}
	return out, nil
}

// recordWithdrawal adds what the ledger's withdrawal events of a transaction say it
// paid to each lease's recorded payout (as listed before the transaction).
func (c *Checker) recordWithdrawal(ctx context.Context, res *chain.Result, batch []candidate, t *tally) {
	paid := map[market.LeaseID]market.Coin{}
	for _, ev := range res.Events {
		if ev.Type != ledger.EventWithdrawal || ev.Attrs[ledger.AttrProvider] != c.cfg.Provider {
			continue
		}
		id, err := ledger.LeaseOfEvent(ev.Attrs)
		var amt market.Coin
		if err == nil {
			amt, err = market.ParseCoin(ev.Attrs[ledger.AttrAmount])
		}
		if err != nil {
			// The next check reads the payout from the ledger.
			c.log.WarnContext(ctx, "balance: unreadable withdrawal event", slog.Any("attributes", ev.Attrs), slog.String("error", err.Error()))
			continue
		}
		paid[id] = amt
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cand := range batch {
		t.w.Leases = append(t.w.Leases, cand.id)
		amt, ok := paid[cand.id]
		if !ok {
			continue
		}
		t.amount[amt.Denom] += uint64(amt.Amount)
		total := cand.withdrawn
		if total.Denom == "" {
			total.Denom = amt.Denom
		}
		total.Amount += amt.Amount
		if _, err := c.rec.raise(cand.id, total, ledger.LeaseActive); err != nil {
			c.log.WarnContext(ctx, "balance: cannot record a withdrawal", slog.String("lease", cand.id.String()), slog.String("error", err.Error()))
		}
	}
	c.rec.lastHeight, c.rec.lastTime = res.Height, now
	c.dirty = true
	c.earningsGaugesLocked()
	t.w.Txs++
	t.w.Height = res.Height
}

// coins are amounts per denomination, sorted.
func coins(m map[string]uint64) []market.Coin {
	out := make([]market.Coin, 0, len(m))
	for d, v := range m {
		out = append(out, market.Coin{Amount: market.Uint(v), Denom: d})
	}
	slices.SortFunc(out, func(a, b market.Coin) int { return strings.Compare(a.Denom, b.Denom) })
	return out
}
