package chain_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/testenv"
)

// Several processes signing with one key, as several CLI commands run at once would:
// each has its own client and broadcaster, and so its own idea of the account's
// sequence. Every transfer has its own amount, so the ledger's transfer events say
// which submissions landed and how often. Every submission must be reported as what
// the ledger shows: landed exactly once with the block it is in, and never a
// wrong_sequence left to the caller.
func TestSharedKeyBroadcasters(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	const (
		processes = 6 // broadcasters, each with its own client
		workers   = 3 // concurrent submissions per broadcaster
		each      = 8 // transfers per worker
	)
	to := l.Address(t, "provider")
	from := l.Address(t, "tenant")
	type outcome struct {
		res *chain.Result
		err error
	}
	outcomes := make([]outcome, processes*workers*each) // by amount-1
	var wg sync.WaitGroup
	for p := range processes {
		c := l.Client(t)
		br := l.Broadcaster(t, c, "tenant")
		// Half the processes batch through Run and Submit, as the provider does.
		batching := p%2 == 1
		if batching {
			ctx, cancel := context.WithCancel(t.Context())
			var run sync.WaitGroup
			run.Add(1)
			go func() { defer run.Done(); _ = br.Run(ctx) }()
			t.Cleanup(func() { cancel(); run.Wait() })
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					amount := (p*workers+w)*each + i + 1
					msg := &ledger.MsgSend{From: from, To: to, Amount: []market.Coin{{Amount: market.Uint(amount), Denom: ledger.DefaultDenom}}}
					var o outcome
					if batching {
						o.res, o.err = br.Submit(t.Context(), msg)
					} else {
						o.res, o.err = br.Broadcast(t.Context(), msg)
					}
					outcomes[amount-1] = o
				}
			}()
		}
	}
	wg.Wait()

	// What the ledger shows: every transfer from the key, with its block.
	c := l.Client(t)
	last, err := c.Height(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	landed := map[int][]int64{} // amount → heights of its transfers
	stop := errors.New("done")
	err = chain.NewFeed(c, 1).Run(t.Context(), func(_ context.Context, b ledger.Block) error {
		for _, e := range b.Events {
			if e.Type == ledger.EventTransfer && e.Attrs[ledger.AttrFrom] == from {
				coin, err := market.ParseCoin(e.Attrs[ledger.AttrAmount])
				if err != nil {
					return err
				}
				landed[int(coin.Amount)] = append(landed[int(coin.Amount)], b.Height)
			}
		}
		if b.Height >= last {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("feed: %v", err)
	}
	var wrongSeq, failed int
	for i, o := range outcomes {
		amount := i + 1
		heights := landed[amount]
		if len(heights) > 1 {
			t.Errorf("transfer of %d landed %d times (blocks %v)", amount, len(heights), heights)
		}
		switch {
		case o.err != nil:
			failed++
			if errors.Is(o.err, ledger.ErrWrongSequence) {
				wrongSeq++
			}
			if len(heights) > 0 {
				t.Errorf("transfer of %d reported failed (%v), but it is in block %d", amount, o.err, heights[0])
			} else {
				t.Errorf("transfer of %d failed: %v", amount, o.err)
			}
		case len(heights) == 0:
			t.Errorf("transfer of %d reported in block %d (tx %X), but the ledger has no such transfer", amount, o.res.Height, o.res.TxHash)
		case heights[0] != o.res.Height:
			t.Errorf("transfer of %d reported in block %d, the ledger has it in block %d", amount, o.res.Height, heights[0])
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d submissions failed, %d of them with an unrepaired wrong_sequence", failed, len(outcomes), wrongSeq)
	}
}
