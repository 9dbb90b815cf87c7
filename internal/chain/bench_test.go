package chain_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/testenv"
)

// signedSends pre-signs n transfers of 1..n uakt from a dev account, sequences 0..n-1.
func signedSends(b *testing.B, l *testenv.LedgerNode, from, to string, n int) [][]byte {
	b.Helper()
	key, err := l.Keys.Signer(from)
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Address(b, from)
	txs := make([][]byte, n)
	for i := range n {
		m, err := ledger.EncodeMsg(&ledger.MsgSend{From: addr, To: to, Amount: []market.Coin{{Amount: market.Uint(i + 1), Denom: ledger.DefaultDenom}}})
		if err != nil {
			b.Fatal(err)
		}
		txs[i], err = ledger.SignTx(ledger.TxBody{ChainID: "berth-test", Signer: addr, Sequence: uint64(i), Msgs: []ledger.EncodedMsg{m}}, key)
		if err != nil {
			b.Fatal(err)
		}
	}
	return txs
}

// BenchmarkTxToEvent measures the time from handing a transaction to the node to
// receiving its event from the feed (the provider's view), one transaction at a time.
// It reports the median and 99th percentile. With test settings a block is made as soon
// as a transaction arrives; with 1 s blocks transactions arrive at random moments.
func BenchmarkTxToEvent(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{{"test-settings", 0}, {"1s-blocks", time.Second}} {
		b.Run(bc.name, func(b *testing.B) {
			l := testenv.Ledger(b, testenv.LedgerOptions{BlockInterval: bc.interval})
			c := l.Client(b)
			ctx, cancel := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			wg.Add(2)
			go func() { defer wg.Done(); _ = c.Run(ctx) }()
			amounts := make(chan string, 64)
			from, err := c.Height(ctx)
			if err != nil {
				b.Fatal(err)
			}
			go func() {
				defer wg.Done()
				_ = chain.NewFeed(c, from+1).Run(ctx, func(_ context.Context, blk ledger.Block) error {
					for _, e := range blk.Events {
						if e.Type == ledger.EventTransfer {
							amounts <- e.Attrs[ledger.AttrAmount]
						}
					}
					return nil
				})
			}()
			txs := signedSends(b, l, "tenant", l.Address(b, "provider"), b.N)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i, tx := range txs {
				if bc.interval > 0 {
					// Transactions arrive at random points of the block interval, not
					// right after a block (which would wait a whole interval).
					b.StopTimer()
					time.Sleep(rand.N(bc.interval))
					b.StartTimer()
				}
				start := time.Now()
				if _, err := c.BroadcastTxSync(ctx, tx); err != nil {
					b.Fatalf("tx %d: %v", i, err)
				}
				want := strconv.Itoa(i+1) + ledger.DefaultDenom
				for got := range amounts {
					if got == want {
						break
					}
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkThroughput measures transactions per second accepted and committed by an
// in-process node with the test settings: accounts send pre-signed transfers as fast
// as the mempool takes them, and the clock stops when the last is in a block.
func BenchmarkThroughput(b *testing.B) {
	const accounts = 8
	names := make([]string, accounts+1)
	for i := range accounts {
		names[i] = fmt.Sprintf("a%d", i)
	}
	names[accounts] = "sink"
	l := testenv.Ledger(b, testenv.LedgerOptions{Accounts: names})
	c := l.Client(b)
	ctx, cancel := context.WithCancel(b.Context())
	var run sync.WaitGroup
	run.Add(1)
	go func() { defer run.Done(); _ = c.Run(ctx) }()
	defer func() { cancel(); run.Wait() }()
	per := max(b.N/accounts, 1)
	batches := make([][][]byte, accounts)
	for i := range accounts {
		batches[i] = signedSends(b, l, names[i], l.Address(b, "sink"), per)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	hashes := make([][]byte, accounts)
	for i := range accounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, tx := range batches[i] {
				h, err := c.BroadcastTxSync(ctx, tx)
				if err != nil {
					b.Errorf("account %d tx %d: %v", i, j, err)
					return
				}
				hashes[i] = h
			}
		}()
	}
	wg.Wait()
	// Every account's last transfer is in a block once its balance moved by all of
	// them: wait for the sink to hold the total.
	want := uint64(1_000_000_000_000) + uint64(accounts)*uint64(per*(per+1)/2)
	for {
		var acc ledger.AccountResponse
		if err := ledger.QueryAccount.Into(ctx, c, ledger.AccountRequest{Address: l.Address(b, "sink")}, &acc); err != nil {
			b.Fatal(err)
		}
		if uint64(acc.Balance(ledger.DefaultDenom)) == want {
			break
		}
		h, err := c.Height(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.WaitHeight(ctx, h+1); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(accounts*per)/elapsed.Seconds(), "tx/s")
}
