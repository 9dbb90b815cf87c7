package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cmtbytes "github.com/cometbft/cometbft/libs/bytes"

	"berth.dev/berth/internal/ledger"
)

// BroadcastOptions tune a Broadcaster.
type BroadcastOptions struct {
	// MaxMsgsPerTx bounds a batch (default and ceiling: the chain's max_msgs_per_tx).
	MaxMsgsPerTx int
	// Timeout bounds the wait for a transaction to be in a block (default 30 s).
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
	Events []Event           `json:"events"`
}

// txOverhead bounds a transaction's size beyond its messages: envelope, key,
// signature, signer and memo.
const txOverhead = 2048

// Broadcaster sends one account's transactions. Broadcast sends messages as one
// transaction and waits for it; Submit queues messages to be batched with others by
// Run. Sequence numbers are assigned in submission order; a sequence mismatch (another
// process using the key, a transaction dropped from the mempool) is repaired by
// re-reading the account and signing again.
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

// ErrTimeout reports a transaction not seen in a block within the timeout. It may still
// be included later.
var ErrTimeout = errors.New("transaction not included in time")

// ErrClosed reports a Submit after the broadcaster's Run has ended.
var ErrClosed = errors.New("broadcaster is not running")

var errInclusionTimeout = errors.New("inclusion timeout")

// Broadcast sends msgs as one transaction and waits until it is in a block. A
// transaction the ledger rejects returns its *ledger.Error (with the block's height in
// the message when it was included and failed).
func (b *Broadcaster) Broadcast(ctx context.Context, msgs ...ledger.Msg) (*Result, error) {
	for attempt := 0; ; attempt++ {
		hash, err := b.send(ctx, msgs)
		if err != nil {
			return nil, err
		}
		res, err := b.wait(ctx, hash)
		// A transaction included with a stale sequence (another user of the key got in
		// first) changed nothing: sign again with the right one.
		if errors.Is(err, ledger.ErrWrongSequence) && attempt < 3 {
			continue
		}
		return res, err
	}
}

// send signs msgs with the next sequence and hands the transaction to the node's
// mempool, repairing the sequence when the node disagrees.
func (b *Broadcaster) send(ctx context.Context, msgs []ledger.Msg) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, errors.New("broadcast: no messages")
	}
	body := ledger.TxBody{ChainID: b.c.chainID, Signer: b.addr, Memo: b.opts.Memo}
	for _, m := range msgs {
		em, err := ledger.EncodeMsg(m)
		if err != nil {
			return nil, err
		}
		body.Msgs = append(body.Msgs, em)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if !b.seqKnown {
			var acc ledger.AccountResponse
			if err := b.c.Query(ctx, ledger.QueryAccount, ledger.AccountRequest{Address: b.addr}, &acc); err != nil {
				return nil, fmt.Errorf("account %s: %w", b.addr, err)
			}
			b.seq, b.seqKnown = acc.Account.Sequence, true
		}
		body.Sequence = b.seq
		raw, err := ledger.SignTx(body, b.key)
		if err != nil {
			return nil, err
		}
		r, err := b.c.rpc.BroadcastTxSync(ctx, raw)
		if err != nil && strings.Contains(err.Error(), "tx already exists in cache") && attempt < 3 {
			// These exact bytes were sent before with this sequence: by another user
			// of the key, or by an earlier call of ours (after a timeout, say). Each
			// call is one execution, so never adopt that transaction: move past its
			// sequence and sign again.
			var acc ledger.AccountResponse
			if qerr := b.c.Query(ctx, ledger.QueryAccount, ledger.AccountRequest{Address: b.addr}, &acc); qerr != nil {
				b.seqKnown = false
				return nil, fmt.Errorf("account %s: %w", b.addr, qerr)
			}
			b.seq = max(acc.Account.Sequence, b.seq+1)
			continue
		}
		if err != nil {
			// Unknown whether the node took it: read the sequence again next time.
			b.seqKnown = false
			return nil, fmt.Errorf("broadcast: %w", err)
		}
		if r.Code == 0 {
			b.seq++
			return r.Hash, nil
		}
		err = ledger.ErrorFromCode(r.Code, r.Codespace, r.Log)
		if errors.Is(err, ledger.ErrWrongSequence) && attempt < 3 {
			if want, ok := ledger.ExpectedSequence(err); ok {
				b.seq = want
			} else {
				b.seqKnown = false
			}
			continue
		}
		return nil, err
	}
}

// wait looks for the transaction after each new block until it is found or the
// timeout passes.
func (b *Broadcaster) wait(ctx context.Context, hash []byte) (*Result, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, b.opts.Timeout, errInclusionTimeout)
	defer cancel()
	pause := indexPollFirst
	for {
		h, herr := b.c.Height(ctx)
		if r, err := b.c.rpc.Tx(ctx, hash, false); err == nil {
			res := &Result{TxHash: hash, Height: r.Height}
			if r.TxResult.Code != 0 {
				err := ledger.ErrorFromCode(r.TxResult.Code, r.TxResult.Codespace, r.TxResult.Log)
				if errors.Is(err, ledger.ErrWrongSequence) {
					b.forgetSequence()
				}
				return res, fmt.Errorf("in block %d: %w", r.Height, err)
			}
			res.Events = convertEvents(r.TxResult.Events, int(r.Index))
			return res, nil
		}
		// Not in a block yet, or in one the node is still indexing (it indexes after the
		// commit, concurrently), or the node is briefly unreachable: look again at the
		// next block, or after a pause if that comes first. A node that makes blocks
		// only for transactions may make no next block while we wait.
		if herr != nil {
			h = 0
		}
		wctx, wcancel := context.WithTimeout(ctx, pause)
		_, err := b.c.WaitHeight(wctx, h+1)
		wcancel()
		if ctx.Err() != nil {
			// The sequence stays counted: if the mempool dropped the transaction, the
			// node's wrong-sequence answer to the next one repairs it.
			if errors.Is(context.Cause(ctx), errInclusionTimeout) {
				return nil, fmt.Errorf("%w: %X after %s", ErrTimeout, hash, b.opts.Timeout)
			}
			return nil, ctx.Err()
		}
		if err == nil {
			pause = indexPollFirst
		} else {
			pause = min(2*pause, indexPollLongest)
		}
	}
}

// While a transaction is awaited, its lookup is retried at each new block, and between
// blocks after a pause growing from indexPollFirst to indexPollLongest.
const (
	indexPollFirst   = 50 * time.Millisecond
	indexPollLongest = time.Second
)

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
		if b.opts.Linger > 0 && !sleepCtx(ctx, b.opts.Linger) {
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
