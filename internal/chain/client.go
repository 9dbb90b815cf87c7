// Package chain is how providers and tenants talk to the ledger: typed queries, an event
// feed that reads every block's results in order from a given height (so a restart or a
// dropped connection catches up instead of losing events), and a transaction
// broadcaster that signs, tracks the account sequence, recovers from sequence
// mismatches (several processes may share a key), batches messages, waits for
// inclusion, and reports a failure only once the transaction provably did not land.
//
// The node's websocket is used only as a wake-up signal for new blocks: its
// subscription buffer silently drops events under bursts, so what happened is always
// read from block results. Without the websocket everything still works, by polling.
//
// Client and Broadcaster are safe for concurrent use; a Feed is run by one goroutine.
// Client.Run maintains the websocket; it is optional.
package chain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	jsonrpcclient "github.com/cometbft/cometbft/rpc/jsonrpc/client"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/wait"
)

// Client queries a ledger node over its RPC endpoint.
type Client struct {
	rpc     *rpchttp.HTTP
	http    *http.Client
	chainID string
	params  ledger.Params

	mu      sync.Mutex
	newHead chan struct{} // closed and replaced when a new block is announced
	live    bool          // the websocket is delivering new-block events
}

// pollFallback is how often waits poll the node when no websocket wakes them.
const (
	pollWithSocket    = time.Second
	pollWithoutSocket = 50 * time.Millisecond
)

// Dial connects to a node ("tcp://127.0.0.1:26657", "http://…", "unix:///…/rpc.sock")
// and reads the chain's identity and params.
func Dial(ctx context.Context, addr string) (*Client, error) {
	hc, err := jsonrpcclient.DefaultHTTPClient(addr)
	if err != nil {
		return nil, fmt.Errorf("ledger node %s: %w", addr, err)
	}
	rpc, err := rpchttp.NewWithClient(addr, "/websocket", hc)
	if err != nil {
		return nil, fmt.Errorf("ledger node %s: %w", addr, err)
	}
	c := &Client{rpc: rpc, http: hc, newHead: make(chan struct{})}
	var p ledger.ParamsResponse
	if err := ledger.QueryParams.Into(ctx, c, ledger.NoRequest{}, &p); err != nil {
		c.Close()
		return nil, fmt.Errorf("ledger node %s: %w", addr, err)
	}
	c.chainID, c.params = p.ChainID, p.Params
	return c, nil
}

// Close closes the client's idle connections to the node (its keep-alive connections
// would otherwise stay open until the node closes them). The client still works: a
// later call opens a connection again.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// ChainID is the chain's ID.
func (c *Client) ChainID() string { return c.chainID }

// Params are the chain's rules.
func (c *Client) Params() ledger.Params { return c.params }

// QueryRaw asks the node's ledger one query (the ledger.Query… descriptors call it:
// ledger.QueryBid.Into(ctx, client, req, &bid)); a query the ledger refuses returns
// the ledger's *Error.
func (c *Client) QueryRaw(ctx context.Context, path string, req []byte) ([]byte, error) {
	r, err := c.rpc.ABCIQuery(ctx, path, req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", path, err)
	}
	if r.Response.Code != 0 {
		return nil, ledger.ErrorFromCode(r.Response.Code, r.Response.Codespace, r.Response.Log)
	}
	return r.Response.Value, nil
}

// BroadcastTxSync hands a signed transaction to the node's mempool and returns its
// hash; a transaction the node refuses returns the ledger's error.
func (c *Client) BroadcastTxSync(ctx context.Context, tx []byte) ([]byte, error) {
	r, err := c.rpc.BroadcastTxSync(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	if r.Code != 0 {
		return nil, ledger.ErrorFromCode(r.Code, r.Codespace, r.Log)
	}
	return r.Hash, nil
}

// Height is the latest height the application has committed: its state, queries and
// block results are complete up to it. (The node's status reports a block as soon as
// it is stored, before its results are.)
func (c *Client) Height(ctx context.Context) (int64, error) {
	info, err := c.rpc.ABCIInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("node info: %w", err)
	}
	return info.Response.LastBlockHeight, nil
}

// BlockTime is the time of the block at height (its header's, agreed by the
// validators).
func (c *Client) BlockTime(ctx context.Context, height int64) (time.Time, error) {
	r, err := c.rpc.Header(ctx, &height)
	if err != nil {
		return time.Time{}, fmt.Errorf("block %d header: %w", height, err)
	}
	if r.Header == nil {
		return time.Time{}, fmt.Errorf("block %d: the node has no header", height)
	}
	return r.Header.Time, nil
}

// BlockResults returns the results of the block at height.
func (c *Client) BlockResults(ctx context.Context, height int64) (*ctypes.ResultBlockResults, error) {
	r, err := c.rpc.BlockResults(ctx, &height)
	if err != nil {
		return nil, fmt.Errorf("block %d results: %w", height, err)
	}
	return r, nil
}

// Run keeps a websocket subscription to new blocks, so that waits wake as soon as a
// block is committed; it reconnects after failures. It returns when ctx ends.
func (c *Client) Run(ctx context.Context) error {
	// The node may not be up yet: keep trying (waits poll meanwhile).
	if err := wait.Retry(ctx, 100*time.Millisecond, 5*time.Second, func(context.Context) error { return c.rpc.Start() },
		func(error, time.Duration) {}); err != nil {
		return nil // ctx ended
	}
	defer func() { _ = c.rpc.Stop() }()
	// A subscription that ends is made again after a pause; the waits poll meanwhile.
	wait.Keep(ctx, wait.Backoff{First: 100 * time.Millisecond, Longest: 5 * time.Second}, time.Minute, func(ctx context.Context) error {
		defer c.setLive(false)
		return c.follow(ctx)
	}, nil)
	return nil
}

func (c *Client) follow(ctx context.Context) error {
	const q = "tm.event='NewBlockHeader'"
	subCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ch, err := c.rpc.Subscribe(subCtx, "berth-chain-client", q, 16)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = c.rpc.UnsubscribeAll(uctx, "berth-chain-client")
		cancel()
	}()
	c.setLive(true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-ch:
			if !ok {
				return errors.New("subscription closed")
			}
			c.announce()
		}
	}
}

func (c *Client) setLive(v bool) {
	c.mu.Lock()
	c.live = v
	c.mu.Unlock()
	c.announce() // waiters re-check either way
}

func (c *Client) announce() {
	c.mu.Lock()
	close(c.newHead)
	c.newHead = make(chan struct{})
	c.mu.Unlock()
}

// wakeup returns a channel closed at the next new-block announcement and how long to
// wait for it before polling anyway.
func (c *Client) wakeup() (<-chan struct{}, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live {
		return c.newHead, pollWithSocket
	}
	return c.newHead, pollWithoutSocket
}

// WaitHeight blocks until the chain's height is at least h and returns the height.
func (c *Client) WaitHeight(ctx context.Context, h int64) (int64, error) {
	for {
		wake, poll := c.wakeup()
		cur, err := c.Height(ctx)
		if err == nil && cur >= h {
			return cur, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}
