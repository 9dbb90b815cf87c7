package chain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	cmtbytes "github.com/cometbft/cometbft/libs/bytes"
	rpctypes "github.com/cometbft/cometbft/rpc/jsonrpc/types"
	cmttypes "github.com/cometbft/cometbft/types"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/wait"
)

// BroadcastOptions tune a Broadcaster.
type BroadcastOptions struct {
	// MaxMsgsPerTx bounds a batch (default and ceiling: the chain's max_msgs_per_tx).
	MaxMsgsPerTx int
	// Timeout bounds a Broadcast: signing, sending, sequence repairs and the wait for
	// the transaction to be in a block (default 30 s).
	Timeout time.Duration
	// InFlight is how many batches may wait for inclusion at once (default 16).
	InFlight int
	// Linger is how long Run waits, once a request is queued, for others to join its
	// batch (default 0: no wait).
	Linger time.Duration
	// Memo is written in every transaction.
	Memo string
}

// Result is a transaction in a block. A batch's callers share their transaction's
// result: its events are all the batch's.
type Result struct {
	TxHash cmtbytes.HexBytes `json:"tx_hash"`
	Height int64             `json:"height"`
	Events []ledger.Event    `json:"events"`
}

// txOverhead bounds a transaction's size beyond its messages: envelope, key,
// signature, signer and memo.
const txOverhead = 2048

// Broadcaster sends one account's transactions. Broadcast sends messages as one
// transaction and waits for it; Submit queues messages to be batched with others by
// Run.
//
// Several broadcasters may sign for one account at once (several processes using one
// key): each call's messages are executed at most once, and a call reports failure
// only when its transaction provably did not land. Sequence numbers are assigned in
// submission order; a sequence the node refuses (another user of the key got in
// first, a transaction dropped from the mempool) is repaired by re-reading the
// expected sequence and signing again, a bounded number of times. A signed
// transaction the node may have taken is never signed again with another sequence
// until it is proven that it cannot land: the account has gone past its sequence and
// no block holds it. Until then it is looked up by hash, and sent again as the same
// bytes (harmless: one sequence lands once). When the confirmation is lost (the wait
// times out, the caller gives up, the node's answer is lost), the transaction is
// looked up once more by hash and in the blocks before anything is reported.
type Broadcaster struct {
	c    *Client
	key  ledger.Signer
	addr string
	opts BroadcastOptions

	mu       sync.Mutex // orders signing and mempool admission
	seq      uint64
	seqKnown bool

	qmu     sync.Mutex
	queue   []*request
	running bool // Run is taking requests
	closed  bool // Run has ended
	kick    chan struct{}
}

type request struct {
	msgs []ledger.Msg
	size int // encoded size of the messages
	done chan outcome
}

type outcome struct {
	res *Result
	err error
}

// NewBroadcaster returns a broadcaster for the key's account.
func NewBroadcaster(c *Client, key ledger.Signer, opts BroadcastOptions) (*Broadcaster, error) {
	addr, err := key.PubKey().Address(c.params.AddressPrefix)
	if err != nil {
		return nil, err
	}
	limit := int(c.params.MaxMsgsPerTx)
	if opts.MaxMsgsPerTx <= 0 || opts.MaxMsgsPerTx > limit {
		opts.MaxMsgsPerTx = limit
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.InFlight <= 0 {
		opts.InFlight = 16
	}
	return &Broadcaster{c: c, key: key, addr: addr, opts: opts, kick: make(chan struct{}, 1)}, nil
}

// Address is the account the broadcaster signs for.
func (b *Broadcaster) Address() string { return b.addr }

// ErrTimeout reports a transaction sent but not seen in a block within the timeout,
// and not proven lost either: it may still be included later. The error names its
// hash.
var ErrTimeout = errors.New("transaction not included in time")

// ErrNotIncluded reports a transaction that provably did not land and will not: the
// account's sequence went past it and no block holds it. Nothing it asked for was done.
var ErrNotIncluded = errors.New("transaction not included")

// ErrClosed reports a Submit after the broadcaster's Run has ended.
var ErrClosed = errors.New("broadcaster is not running")

var errInclusionTimeout = errors.New("inclusion timeout")

// Bounds of the repairs. A transaction is signed again after the node refused its
// sequence at most maxSequenceRepairs times, pausing (jittered, growing up to
// repairPauseLongest) before every other attempt so that processes racing for the
// account's next sequences spread out: a few seconds of pauses at worst. It is signed
// afresh after a version of it provably failed to land at most maxResigns times.
const (
	maxSequenceRepairs = 100
	maxResigns         = 4
	repairPauseFirst   = 5 * time.Millisecond
	repairPauseLongest = 100 * time.Millisecond
)

// Broadcast sends msgs as one transaction and waits until it is in a block. A
// transaction the ledger rejects returns its *ledger.Error (with the block's height in
// the message when it was included and failed). An error is returned only when the
// messages provably were not executed, except ErrTimeout and the caller's context
// error, which name the transaction and say it may still be included: its fate could
// not be learnt in time.
func (b *Broadcaster) Broadcast(ctx context.Context, msgs ...ledger.Msg) (*Result, error) {
	body, err := b.body(msgs)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeoutCause(ctx, b.opts.Timeout, errInclusionTimeout)
	defer cancel()
	after, err := b.c.Height(wctx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	var lost error // why the last version cannot land
	for range maxResigns + 1 {
		tx, err := b.send(wctx, body, after)
		if err != nil {
			// Nothing the node may have taken (earlier versions are lost).
			return nil, err
		}
		f, res, err := b.await(wctx, tx)
		if f == fatePending {
			// The wait ended before the transaction was seen: before reporting that,
			// look it up once more, by hash and in the blocks.
			gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), settleGrace)
			f, res, err = b.check(gctx, tx)
			gcancel()
			switch f {
			case fatePending:
				return nil, b.unsettled(wctx, tx, err)
			case fateLost:
				return nil, b.lostAtEnd(wctx, tx, err)
			}
		}
		if f == fateFinal {
			return res, err
		}
		// Lost: it changed nothing and never will. Sign the messages again, with a
		// sequence read afresh.
		b.forgetSequence()
		lost = err
		if wctx.Err() != nil {
			return nil, b.lostAtEnd(wctx, tx, err)
		}
	}
	return nil, fmt.Errorf("%w: signed %d times, each time another transaction took the sequence; last: %w", ErrNotIncluded, maxResigns+1, lost)
}

// body encodes msgs into a transaction body (without its sequence).
func (b *Broadcaster) body(msgs []ledger.Msg) (ledger.TxBody, error) {
	if len(msgs) == 0 {
		return ledger.TxBody{}, errors.New("broadcast: no messages")
	}
	body := ledger.TxBody{ChainID: b.c.chainID, Signer: b.addr, Memo: b.opts.Memo}
	for _, m := range msgs {
		em, err := ledger.EncodeMsg(m)
		if err != nil {
			return ledger.TxBody{}, err
		}
		body.Msgs = append(body.Msgs, em)
	}
	return body, nil
}

// unsettled is the error of a transaction whose fate is unknown when the wait ends.
func (b *Broadcaster) unsettled(wctx context.Context, tx *signedTx, lookErr error) error {
	why := ""
	if lookErr != nil {
		why = fmt.Sprintf(" (looking it up: %v)", lookErr)
	}
	if errors.Is(context.Cause(wctx), errInclusionTimeout) {
		return fmt.Errorf("%w: tx %X after %s; it may still be included%s", ErrTimeout, tx.hash, b.opts.Timeout, why)
	}
	return fmt.Errorf("tx %X was sent but not yet seen in a block; it may still be included%s: %w", tx.hash, why, wctx.Err())
}

// lostAtEnd is the error of a transaction proven lost when the wait has ended, too
// late to sign it again.
func (b *Broadcaster) lostAtEnd(wctx context.Context, tx *signedTx, why error) error {
	end := "the wait was interrupted"
	if errors.Is(context.Cause(wctx), errInclusionTimeout) {
		end = fmt.Sprintf("the %s timeout passed", b.opts.Timeout)
	}
	return fmt.Errorf("%w: tx %X (%w); %s before it could be signed again", ErrNotIncluded, tx.hash, why, end)
}

// send signs the body with the next sequence and hands the transaction to the node's
// mempool, repairing the sequence when the node refuses it. It returns the
// transaction when the node took it or may have (its answer was lost), and an error
// when the node took nothing.
func (b *Broadcaster) send(ctx context.Context, body ledger.TxBody, after int64) (*signedTx, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pause := wait.Backoff{First: repairPauseFirst, Longest: repairPauseLongest}
	learnt := false // the sequence was just read from the node's refusal
	for attempt := 0; ; attempt++ {
		if !b.seqKnown {
			var acc ledger.AccountResponse
			if err := ledger.QueryAccount.Into(ctx, b.c, ledger.AccountRequest{Address: b.addr}, &acc); err != nil {
				return nil, fmt.Errorf("account %s: %w", b.addr, err)
			}
			b.seq, b.seqKnown = acc.Account.Sequence, true
		}
		body.Sequence = b.seq
		raw, err := ledger.SignTx(body, b.key)
		if err != nil {
			return nil, err
		}
		tx := &signedTx{raw: raw, hash: cmttypes.Tx(raw).Hash(), seq: b.seq, after: after}
		r, err := b.c.rpc.BroadcastTxSync(ctx, raw)
		if err != nil && strings.Contains(err.Error(), "tx already exists in cache") && attempt < maxSequenceRepairs {
			// These exact bytes were sent before with this sequence, by another user
			// of the key (this call never sent them: it signs a sequence again only
			// after the earlier version is lost). Each call is one execution, so never
			// adopt that transaction: move past its sequence and sign again.
			var acc ledger.AccountResponse
			if qerr := ledger.QueryAccount.Into(ctx, b.c, ledger.AccountRequest{Address: b.addr}, &acc); qerr != nil {
				b.seqKnown = false
				return nil, fmt.Errorf("account %s: %w", b.addr, qerr)
			}
			b.seq = max(acc.Account.Sequence, b.seq+1)
			continue
		}
		var refused *rpctypes.RPCError
		if errors.As(err, &refused) {
			// The node answered that its mempool did not take it (full, say).
			return nil, fmt.Errorf("broadcast: %w", err)
		}
		if err != nil {
			// No answer: the node may have taken the transaction. Await it (it is sent
			// again while it may still land), and read the sequence again next time.
			b.seqKnown = false
			return tx, nil
		}
		if r.Code == 0 {
			b.seq++
			return tx, nil
		}
		err = ledger.ErrorFromCode(r.Code, r.Codespace, r.Log)
		if !errors.Is(err, ledger.ErrWrongSequence) {
			return nil, err
		}
		// Refused at the mempool's door: this version is not anywhere, so signing
		// another is safe.
		if attempt >= maxSequenceRepairs {
			return nil, fmt.Errorf("sequence refused %d times (other users of the key keep taking it): %w", attempt+1, err)
		}
		if want, ok := ledger.ExpectedSequence(err); ok {
			b.seq = want
		} else {
			b.seqKnown = false
		}
		// A sequence just learnt is used at once: a pause would let it go stale. When
		// another user of the key took that one too, pause (jittered, growing) before
		// trying again, so that those racing for the account's next sequences spread
		// out instead of colliding again.
		if learnt {
			if !wait.Sleep(ctx, rand.N(pause.Next())+time.Millisecond) { //nolint:gosec // G404: jitter, not a secret
				return nil, fmt.Errorf("%w (while repairing the sequence)", ctx.Err())
			}
		}
		learnt = !learnt
	}
}

func (b *Broadcaster) forgetSequence() {
	b.mu.Lock()
	b.seqKnown = false
	b.mu.Unlock()
}

// Submit queues msgs to go out with other queued messages in one transaction and waits
// for the result. Run sends the queue; a Submit after Run has ended fails with
// ErrClosed. When ctx ends before a batch takes the request, it is withdrawn (nothing
// is sent); after, the outcome of the batch is awaited.
func (b *Broadcaster) Submit(ctx context.Context, msgs ...ledger.Msg) (*Result, error) {
	if len(msgs) == 0 {
		return nil, errors.New("submit: no messages")
	}
	if len(msgs) > b.opts.MaxMsgsPerTx {
		return nil, fmt.Errorf("submit: %d messages, at most %d per transaction", len(msgs), b.opts.MaxMsgsPerTx)
	}
	r := &request{msgs: msgs, done: make(chan outcome, 1)}
	for _, m := range msgs {
		em, err := ledger.EncodeMsg(m)
		if err != nil {
			return nil, err
		}
		r.size += len(em.Value) + len(em.Type) + 32
	}
	b.qmu.Lock()
	if b.closed {
		b.qmu.Unlock()
		return nil, ErrClosed
	}
	b.queue = append(b.queue, r)
	b.qmu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	select {
	case o := <-r.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	// Withdraw the request if no batch has taken it; otherwise its messages are on
	// their way and the outcome follows (within the inclusion timeout).
	b.qmu.Lock()
	for i, q := range b.queue {
		if q == r {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.qmu.Unlock()
			return nil, ctx.Err()
		}
	}
	b.qmu.Unlock()
	o := <-r.done
	return o.res, o.err
}

// Run sends queued messages in batches until ctx ends; batches wait for inclusion
// concurrently (up to InFlight). It returns after every batch it started is done.
func (b *Broadcaster) Run(ctx context.Context) error {
	b.qmu.Lock()
	if b.running || b.closed {
		b.qmu.Unlock()
		return errors.New("broadcaster: Run called twice")
	}
	b.running = true
	b.qmu.Unlock()
	sem := make(chan struct{}, b.opts.InFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		b.qmu.Lock()
		b.closed = true
		b.qmu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			b.failQueued(ctx.Err())
			return nil
		case <-b.kick:
		}
		// Requests arriving together (a block's bids) go out together.
		if b.opts.Linger > 0 && !wait.Sleep(ctx, b.opts.Linger) {
			b.failQueued(ctx.Err())
			return nil
		}
		for {
			// A slot first, then the batch: what queues while the slots are busy joins
			// the next batch.
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				b.failQueued(ctx.Err())
				return nil
			}
			batch := b.take()
			if len(batch) == 0 {
				<-sem
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				b.sendBatch(ctx, batch)
			}()
		}
	}
}

// take removes from the queue as many whole requests as fit in one transaction, by
// message count and size (a request too large alone goes alone, and fails alone).
func (b *Broadcaster) take() []*request {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	maxBytes := int(b.c.params.MaxTxBytes) - txOverhead
	n, msgs, size := 0, 0, 0
	for n < len(b.queue) && msgs+len(b.queue[n].msgs) <= b.opts.MaxMsgsPerTx && (n == 0 || size+b.queue[n].size <= maxBytes) {
		msgs += len(b.queue[n].msgs)
		size += b.queue[n].size
		n++
	}
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	return batch
}

func (b *Broadcaster) failQueued(err error) {
	b.qmu.Lock()
	q := b.queue
	b.queue = nil
	b.qmu.Unlock()
	for _, r := range q {
		r.done <- outcome{err: err}
	}
}

// sendBatch sends a batch as one transaction. When a message fails, the transaction
// changed nothing; the batch's requests are then sent one by one, so each gets its own
// result and one bad request does not fail the others.
func (b *Broadcaster) sendBatch(ctx context.Context, batch []*request) {
	var msgs []ledger.Msg
	for _, r := range batch {
		msgs = append(msgs, r.msgs...)
	}
	res, err := b.Broadcast(ctx, msgs...)
	if err != nil && len(batch) > 1 && isMsgError(err) {
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.Broadcast(ctx, r.msgs...)
				r.done <- outcome{res, err}
			}()
		}
		wg.Wait()
		return
	}
	for _, r := range batch {
		r.done <- outcome{res, err}
	}
}

// isMsgError reports a failure of a message's execution (as opposed to the
// transaction's encoding, signature or sequence, which would fail alone too).
func isMsgError(err error) bool {
	switch ledger.CodeOf(err) {
	case ledger.CodeTxDecode, ledger.CodeTxTooLarge, ledger.CodeWrongChain, ledger.CodeUnauthorized,
		ledger.CodeWrongSequence, ledger.CodeUnknownAccount, ledger.CodeInternal:
		return false
	}
	var e *ledger.Error
	return errors.As(err, &e)
}
