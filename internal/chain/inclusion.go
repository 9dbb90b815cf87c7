package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/wait"
)

// How a broadcaster learns a transaction's fate once the node may have taken it:
// by hash in the node's index while it waits, and from committed state (the account's
// sequence, then the blocks themselves) when the index does not show it.

// A transaction not found by hash for recheckAfter, or for recheckBlocks blocks, has
// its account's sequence checked (and the blocks read, once the sequence is past
// it); while it may still land it is sent again. When the caller's wait has ended
// with its fate unknown, settleGrace bounds one last look.
const (
	recheckAfter  = 2 * time.Second
	recheckBlocks = 2
	settleGrace   = 5 * time.Second
)

// signedTx is one signed version of a call's messages.
type signedTx struct {
	raw   []byte
	hash  []byte
	seq   uint64
	after int64 // a height before it was signed: only later blocks can hold it
}

// fate is what is known of a signed transaction.
type fate int

const (
	// fatePending: it may still land (or has, and the node does not show it yet).
	fatePending fate = iota
	// fateFinal: it is in a block; executed, or failed with the ledger's error.
	fateFinal
	// fateLost: it can never land and changed nothing: sign the messages again.
	fateLost
)

// await looks for the transaction after each new block until it is in a block, it is
// lost, or ctx ends (fatePending, with ctx's error). While it is not found, the
// account's sequence is checked now and then: once past the transaction's, the blocks
// say whether it landed; before, it is sent again in case the node lost it (a
// restarted node's mempool is empty).
func (b *Broadcaster) await(ctx context.Context, tx *signedTx) (fate, *Result, error) {
	pause := wait.Backoff{First: indexPollFirst, Longest: indexPollLongest}
	checkedHeight, checkedAt := int64(-1), time.Now()
	for {
		h, herr := b.c.Height(ctx)
		if herr == nil && checkedHeight < 0 {
			checkedHeight = h
		}
		if f, res, err := b.lookup(ctx, tx); f != fatePending {
			return f, res, err
		}
		// Not in a block yet, or in one the node is still indexing (it indexes after the
		// commit, concurrently), or the node is briefly unreachable.
		if herr == nil && (h >= checkedHeight+recheckBlocks || time.Since(checkedAt) >= recheckAfter) {
			if f, res, err := b.settle(ctx, tx); f != fatePending {
				return f, res, err
			}
			// Its sequence is not used yet. Sending the same bytes again is harmless:
			// the node keeps one copy, and one sequence lands once.
			_, _ = b.c.rpc.BroadcastTxSync(ctx, tx.raw)
			checkedHeight, checkedAt = h, time.Now()
		}
		// Look again at the next block, or after a pause if that comes first. A node
		// that makes blocks only for transactions may make no next block while we wait.
		if herr != nil {
			h = 0
		}
		wctx, wcancel := context.WithTimeout(ctx, pause.Next())
		_, err := b.c.WaitHeight(wctx, h+1)
		wcancel()
		if ctx.Err() != nil {
			return fatePending, nil, ctx.Err()
		}
		if err == nil {
			pause.Reset()
		}
	}
}

// check is one look at the transaction's fate: by hash, then from the account's
// sequence and the blocks.
func (b *Broadcaster) check(ctx context.Context, tx *signedTx) (fate, *Result, error) {
	if f, res, err := b.lookup(ctx, tx); f != fatePending {
		return f, res, err
	}
	return b.settle(ctx, tx)
}

// lookup finds the transaction by hash in the node's index. Not found (the node's
// error) is fatePending: the index lags the commit.
func (b *Broadcaster) lookup(ctx context.Context, tx *signedTx) (fate, *Result, error) {
	r, err := b.c.rpc.Tx(ctx, tx.hash, false)
	if err != nil {
		return fatePending, nil, fmt.Errorf("tx %X: %w", tx.hash, err)
	}
	return b.judge(tx, r.Height, int(r.Index), &r.TxResult)
}

// settle decides the transaction's fate from committed state: while the account's
// sequence has not passed the transaction's, it may still land; once it has, the
// transaction is in a block up to the current height or never will be, and the blocks
// (read directly, not through the index) say which.
func (b *Broadcaster) settle(ctx context.Context, tx *signedTx) (fate, *Result, error) {
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(ctx, b.c, ledger.AccountRequest{Address: b.addr}, &acc); err != nil {
		return fatePending, nil, fmt.Errorf("account %s: %w", b.addr, err)
	}
	if acc.Account.Sequence <= tx.seq {
		return fatePending, nil, nil
	}
	// Read after the account, so at least the height the account was read at.
	top, err := b.c.Height(ctx)
	if err != nil {
		return fatePending, nil, err
	}
	for h := tx.after + 1; h <= top; h++ {
		blk, err := b.c.rpc.Block(ctx, &h)
		if err != nil {
			return fatePending, nil, fmt.Errorf("block %d: %w", h, err)
		}
		if blk == nil || blk.Block == nil {
			// A node that has just started may not serve every block it has yet.
			return fatePending, nil, fmt.Errorf("block %d: the node does not have it", h)
		}
		for i, raw := range blk.Block.Txs {
			if !bytes.Equal(raw, tx.raw) {
				continue
			}
			br, err := b.c.BlockResults(ctx, h)
			if err != nil {
				return fatePending, nil, err
			}
			if i >= len(br.TxsResults) {
				return fatePending, nil, fmt.Errorf("block %d: %d transactions, %d results", h, len(blk.Block.Txs), len(br.TxsResults))
			}
			if f, res, err := b.judge(tx, h, i, br.TxsResults[i]); f == fateFinal {
				return f, res, err
			}
			// Included without effect (wrong sequence): a later block may hold it
			// again, if it came before its turn.
		}
	}
	return fateLost, nil, fmt.Errorf("account %s is at sequence %d, and no block from %d to %d holds tx %X (sequence %d): another transaction took its sequence",
		b.addr, acc.Account.Sequence, tx.after+1, top, tx.hash, tx.seq)
}

// judge reads the transaction's result in a block.
func (b *Broadcaster) judge(tx *signedTx, height int64, index int, r *abci.ExecTxResult) (fate, *Result, error) {
	res := &Result{TxHash: tx.hash, Height: height}
	if r.Code == 0 {
		res.Events = convertEvents(r.Events, index)
		return fateFinal, res, nil
	}
	err := ledger.ErrorFromCode(r.Code, r.Codespace, r.Log)
	if errors.Is(err, ledger.ErrWrongSequence) {
		// Included, but not executed: the account's sequence was not its. If the
		// account had passed it, it never will land; if it came before its turn, it
		// may yet.
		if want, ok := ledger.ExpectedSequence(err); ok && want < tx.seq {
			return fatePending, nil, nil
		}
		return fateLost, nil, fmt.Errorf("in block %d: %w", height, err)
	}
	return fateFinal, res, fmt.Errorf("in block %d: %w", height, err)
}

// While a transaction is awaited, its lookup is retried at each new block, and between
// blocks after a pause growing from indexPollFirst to indexPollLongest.
const (
	indexPollFirst   = 50 * time.Millisecond
	indexPollLongest = time.Second
)
