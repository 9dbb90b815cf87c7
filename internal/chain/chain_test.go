package chain_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func createDeploymentMsg(t *testing.T, owner string, dseq uint64) *ledger.MsgCreateDeployment {
	t.Helper()
	r, _, err := sdl.Parse(fixture.WebSDL, sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &ledger.MsgCreateDeployment{
		ID: market.DeploymentID{Owner: owner, DSeq: dseq}, Groups: r.Groups, Version: r.Version,
		Deposit: market.Coin{Amount: 5_000_000, Denom: ledger.DefaultDenom},
	}
}

// collect runs a feed from height from and sends every event to the returned channel
// until the test ends.
func collect(t *testing.T, c *chain.Client, from int64) <-chan ledger.Event {
	t.Helper()
	ch := make(chan ledger.Event, 1024)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := chain.NewFeed(c, from).Run(ctx, func(_ context.Context, b ledger.Block) error {
			for _, e := range b.Events {
				ch <- e
			}
			return nil
		})
		if err != nil {
			t.Errorf("feed: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ch
}

// await reads events until one of the type arrives (failing after 10 s).
func await(t *testing.T, ch <-chan ledger.Event, typ string) ledger.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ch:
			if e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within 10s", typ)
		}
	}
}

func runClient(t *testing.T, c *chain.Client) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestTxEventQuery(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	runClient(t, c)
	events := collect(t, c, 1)
	tenant := l.Broadcaster(t, c, "tenant")
	msg := createDeploymentMsg(t, tenant.Address(), 42)
	res, err := tenant.Broadcast(t.Context(), msg)
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	if res.Height < 1 || len(res.Events) == 0 {
		t.Fatalf("result %+v", res)
	}
	ev := await(t, events, ledger.EventOrderCreated)
	if ev.Attrs[ledger.AttrOwner] != tenant.Address() || ev.Attrs[ledger.AttrDSeq] != "42" || ev.Attrs[ledger.AttrGSeq] != "1" || ev.Attrs[ledger.AttrOSeq] != "1" {
		t.Fatalf("order.created %v", ev.Attrs)
	}
	var d ledger.DeploymentResponse
	if err := ledger.QueryDeployment.Into(t.Context(), c, ledger.DeploymentRequest{ID: msg.ID}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Deployment.State != ledger.DeploymentActive || len(d.Groups) != 1 || !bytes.Equal(d.Deployment.Version, msg.Version) {
		t.Fatalf("deployment %+v", d)
	}

	// The same dseq again fails in the block, with its code, and changes nothing.
	_, err = tenant.Broadcast(t.Context(), msg)
	if !errors.Is(err, ledger.ErrAlreadyExists) {
		t.Fatalf("duplicate deployment: %v", err)
	}
	// A deployment created by someone else's key is refused before the mempool.
	prov := l.Broadcaster(t, c, "provider")
	_, err = prov.Broadcast(t.Context(), createDeploymentMsg(t, tenant.Address(), 43))
	if !errors.Is(err, ledger.ErrUnauthorized) {
		t.Fatalf("deployment for another owner: %v", err)
	}
}

func TestRestartKeepsStateAndHeight(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	tenant := l.Broadcaster(t, c, "tenant")
	msg := createDeploymentMsg(t, tenant.Address(), 7)
	if _, err := tenant.Broadcast(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	// Stop first, then read what the stopped app committed: the node may make one
	// more (empty) block after a state change, before the stop.
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	h1 := l.App().Height()
	info1, _ := l.App().Info(t.Context(), nil)

	// The restarted app reports exactly that state: CometBFT's handshake compares it
	// with its own record, and would refuse to start on a mismatch. Afterwards the
	// chain may move on (the empty block recording the last app hash).
	l.Restart(t)
	if got := l.App().Height(); got < h1 {
		t.Fatalf("height after restart %d, want at least %d", got, h1)
	}
	c2 := l.Client(t)
	br, err := c2.BlockResults(t.Context(), h1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(br.AppHash, info1.LastBlockAppHash) {
		t.Fatalf("app hash at height %d: node recorded %X, the app had %X", h1, br.AppHash, info1.LastBlockAppHash)
	}
	var d ledger.DeploymentResponse
	if err := ledger.QueryDeployment.Into(t.Context(), c2, ledger.DeploymentRequest{ID: msg.ID}, &d); err != nil {
		t.Fatalf("deployment after restart: %v", err)
	}
	tenant2 := l.Broadcaster(t, c2, "tenant")
	res, err := tenant2.Broadcast(t.Context(), createDeploymentMsg(t, tenant.Address(), 8))
	if err != nil {
		t.Fatalf("tx after restart: %v", err)
	}
	if res.Height <= h1 {
		t.Fatalf("height %d after restart, want > %d", res.Height, h1)
	}
}

func TestSequenceRecovery(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	// Two broadcasters with the same key: each believes it owns the sequence.
	a := l.Broadcaster(t, c, "tenant")
	b := l.Broadcaster(t, c, "tenant")
	to := l.Address(t, "provider")
	send := func(br *chain.Broadcaster) error {
		_, err := br.Broadcast(t.Context(), &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: 1, Denom: ledger.DefaultDenom}}})
		return err
	}
	for i := range 3 {
		if err := send(a); err != nil {
			t.Fatalf("a #%d: %v", i, err)
		}
		if err := send(b); err != nil {
			t.Fatalf("b #%d (must recover from the sequence a used): %v", i, err)
		}
	}
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(t.Context(), c, ledger.AccountRequest{Address: a.Address()}, &acc); err != nil {
		t.Fatal(err)
	}
	if acc.Account.Sequence != 6 {
		t.Fatalf("sequence %d, want 6", acc.Account.Sequence)
	}
}

func TestSubmitBatches(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	runClient(t, c)
	br := l.Broadcaster(t, c, "tenant")
	ctx, cancel := context.WithCancel(t.Context())
	var run sync.WaitGroup
	run.Add(1)
	go func() { defer run.Done(); _ = br.Run(ctx) }()
	defer func() { cancel(); run.Wait() }()

	to := l.Address(t, "provider")
	const n = 40
	heights := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			amt := uint64(1)
			if i == 7 {
				amt = 1 << 62 // more than the account has: fails alone
			}
			res, err := br.Submit(t.Context(), &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: market.Uint(amt), Denom: ledger.DefaultDenom}}})
			errs[i] = err
			if res != nil {
				heights[i] = res.Height
			}
		}()
	}
	wg.Wait()
	blocks := map[int64]bool{}
	for i, err := range errs {
		if i == 7 {
			if !errors.Is(err, ledger.ErrInsufficientFunds) {
				t.Fatalf("overdraft: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		blocks[heights[i]] = true
	}
	if len(blocks) >= n-1 {
		t.Fatalf("%d sends in %d blocks: nothing was batched", n-1, len(blocks))
	}
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(t.Context(), c, ledger.AccountRequest{Address: to}, &acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.Balance(ledger.DefaultDenom); got != 1_000_000_000_000+n-1 {
		t.Fatalf("receiver balance %d, want %d", got, 1_000_000_000_000+n-1)
	}
}

func TestFeedCatchesUpFromHeight(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	tenant := l.Broadcaster(t, c, "tenant")
	var last int64
	for i := range 5 {
		res, err := tenant.Broadcast(t.Context(), createDeploymentMsg(t, tenant.Address(), uint64(100+i)))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Height
	}
	// A feed started afterwards, without the websocket, still sees all five orders,
	// in order, and stops at the handler's error.
	seen := []string{}
	stop := errors.New("done")
	err := chain.NewFeed(c, 1).Run(t.Context(), func(_ context.Context, b ledger.Block) error {
		for _, e := range b.Events {
			if e.Type == ledger.EventOrderCreated {
				seen = append(seen, e.Attrs[ledger.AttrDSeq])
			}
		}
		if b.Height == last {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("feed: %v", err)
	}
	want := []string{"100", "101", "102", "103", "104"}
	if len(seen) != len(want) {
		t.Fatalf("orders %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("orders %v, want %v", seen, want)
		}
	}
}

// A Submit whose context ends before a batch takes it is withdrawn: nothing is sent.
// After Run ends, Submit fails at once.
func TestSubmitWithdrawnAndClosed(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	br := l.Broadcaster(t, c, "tenant")
	to := l.Address(t, "provider")
	send := &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: 5, Denom: ledger.DefaultDenom}}}
	gone, cancelGone := context.WithCancel(t.Context())
	cancelGone()
	if _, err := br.Submit(gone, send); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled submit: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = br.Run(ctx) }()
	res, err := br.Submit(t.Context(), &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: 7, Denom: ledger.DefaultDenom}}})
	if err != nil {
		t.Fatal(err)
	}
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(t.Context(), c, ledger.AccountRequest{Address: to}, &acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.Balance(ledger.DefaultDenom); got != 1_000_000_000_000+7 {
		t.Fatalf("receiver has %d after the block %d: the withdrawn 5 was sent too", got, res.Height)
	}
	cancel()
	<-done
	if _, err := br.Submit(t.Context(), send); !errors.Is(err, chain.ErrClosed) {
		t.Fatalf("submit after Run: %v", err)
	}
}

// Sending the same transfer twice from two processes is two transfers: a transaction
// the node has already seen is never taken for the caller's own.
func TestIdenticalTransactionsAreNotMerged(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	a := l.Broadcaster(t, c, "tenant")
	b := l.Broadcaster(t, c, "tenant")
	to := l.Address(t, "provider")
	msg := &ledger.MsgSend{From: a.Address(), To: to, Amount: []market.Coin{{Amount: 7, Denom: ledger.DefaultDenom}}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, br := range []*chain.Broadcaster{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = br.Broadcast(t.Context(), msg) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(t.Context(), c, ledger.AccountRequest{Address: to}, &acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.Balance(ledger.DefaultDenom); got != 1_000_000_000_000+14 {
		t.Fatalf("receiver has %d: want both transfers of 7", got)
	}
}
