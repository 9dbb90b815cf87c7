package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/testenv"
)

// rpcProxy stands between a client and a ledger node's RPC, on 127.0.0.1, and can
// lose the node's answers: the request reaches the node and is handled, then the
// connection is closed before the answer is written, as when a network fails at the
// wrong moment.
type rpcProxy struct {
	URL  string
	mu   sync.Mutex
	lose func(method string, found bool) bool // under mu; found: the answer has a result
	drop func(method string) bool             // under mu: lose the request, before the node sees it
}

func newRPCProxy(t *testing.T, l *testenv.LedgerNode) *rpcProxy {
	t.Helper()
	sock := strings.TrimPrefix(l.RPC(), "unix://")
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	node := &http.Client{Transport: tr}
	p := &rpcProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var call struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &call) // a GET has no body
		p.mu.Lock()
		drop := p.drop != nil && p.drop(call.Method)
		p.mu.Unlock()
		if drop {
			panic(http.ErrAbortHandler)
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://node"+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := node.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var res struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(answer, &res)
		p.mu.Lock()
		lose := p.lose != nil && p.lose(call.Method, len(res.Result) > 0 && string(res.Result) != "null")
		p.mu.Unlock()
		if lose {
			panic(http.ErrAbortHandler) // closes the connection without an answer
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	// Keep-alive connections are closed with the server: the client's side ends too.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); tr.CloseIdleConnections() })
	p.URL = srv.URL
	return p
}

func (p *rpcProxy) setLose(f func(method string, found bool) bool) {
	p.mu.Lock()
	p.lose = f
	p.mu.Unlock()
}

// proxied returns a broadcaster for the tenant whose client goes through the proxy.
func proxied(t *testing.T, l *testenv.LedgerNode, p *rpcProxy, timeout time.Duration) *chain.Broadcaster {
	t.Helper()
	c, err := chain.Dial(t.Context(), p.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, err := l.Keys.Signer("tenant")
	if err != nil {
		t.Fatal(err)
	}
	br, err := chain.NewBroadcaster(c, key, chain.BroadcastOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return br
}

// balance is the account's balance in the default denom.
func balance(t *testing.T, c *chain.Client, addr string) market.Uint {
	t.Helper()
	var acc ledger.AccountResponse
	if err := ledger.QueryAccount.Into(t.Context(), c, ledger.AccountRequest{Address: addr}, &acc); err != nil {
		t.Fatal(err)
	}
	for _, b := range acc.Balances {
		if b.Denom == ledger.DefaultDenom {
			return b.Amount
		}
	}
	return 0
}

// A transaction whose confirmation is lost after it was committed is reported as
// landed, after it is looked up (by hash, or in the blocks), and is executed once.
func TestLostConfirmationReportedLanded(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lose decides which answers the proxy loses; cancel interrupts the caller.
		lose    func(cancel context.CancelFunc) func(method string, found bool) bool
		timeout time.Duration
	}{{
		// The node took the transaction, its answer to broadcast_tx_sync was lost.
		name: "broadcast answer lost",
		lose: func(context.CancelFunc) func(string, bool) bool {
			once := false
			return func(method string, _ bool) bool {
				if method == "broadcast_tx_sync" && !once {
					once = true
					return true
				}
				return false
			}
		},
	}, {
		// The node's index never answers: the inclusion wait times out although the
		// transaction is in a block.
		name:    "lookups by hash fail until the timeout",
		timeout: 2 * time.Second,
		lose: func(context.CancelFunc) func(string, bool) bool {
			return func(method string, _ bool) bool { return method == "tx" }
		},
	}, {
		// The caller gives up (Ctrl-C, its deadline) just as the node has the
		// transaction in a block, and the answer saying so is lost.
		name: "caller interrupted after the commit",
		lose: func(cancel context.CancelFunc) func(string, bool) bool {
			once := false
			return func(method string, found bool) bool {
				if method == "tx" && found && !once {
					once = true
					cancel()
					return true
				}
				return false
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := testenv.Ledger(t, testenv.LedgerOptions{})
			c := l.Client(t)
			p := newRPCProxy(t, l)
			br := proxied(t, l, p, tc.timeout)
			to := l.Address(t, "provider")
			before := balance(t, c, to)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p.setLose(tc.lose(cancel))
			res, err := br.Broadcast(ctx, &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: 7, Denom: ledger.DefaultDenom}}})
			p.setLose(nil)
			if err != nil {
				t.Fatalf("reported failed: %v (receiver got %d)", err, balance(t, c, to)-before)
			}
			if got := balance(t, c, to) - before; got != 7 {
				t.Fatalf("receiver got %d, want 7 (once)", got)
			}
			if res.Height < 1 || len(res.TxHash) == 0 || len(res.Events) == 0 {
				t.Fatalf("result %+v", res)
			}
			var transfer bool
			for _, e := range res.Events {
				transfer = transfer || e.Type == ledger.EventTransfer && e.Attrs[ledger.AttrAmount] == "7"+ledger.DefaultDenom
			}
			if !transfer {
				t.Fatalf("result's events %+v: no transfer of 7", res.Events)
			}
		})
	}
}

// A transaction the node never received, whose sequence another user of the key then
// took, provably did not land: it is signed again with the next sequence and lands
// once.
func TestLostTransactionSignedAgain(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	c := l.Client(t)
	p := newRPCProxy(t, l)
	br := proxied(t, l, p, 0)
	other := l.Broadcaster(t, c, "tenant") // another process with the key
	to := l.Address(t, "provider")
	before := balance(t, c, to)
	var otherErr error
	once := false
	p.mu.Lock()
	p.drop = func(method string) bool {
		if method != "broadcast_tx_sync" || once {
			return false
		}
		once = true
		_, otherErr = other.Broadcast(t.Context(), &ledger.MsgSend{From: other.Address(), To: to, Amount: []market.Coin{{Amount: 5, Denom: ledger.DefaultDenom}}})
		return true
	}
	p.mu.Unlock()
	res, err := br.Broadcast(t.Context(), &ledger.MsgSend{From: br.Address(), To: to, Amount: []market.Coin{{Amount: 7, Denom: ledger.DefaultDenom}}})
	p.mu.Lock()
	defer p.mu.Unlock()
	if otherErr != nil {
		t.Fatalf("the other process's transfer: %v", otherErr)
	}
	if err != nil {
		t.Fatalf("reported failed: %v", err)
	}
	if got := balance(t, c, to) - before; got != 12 {
		t.Fatalf("receiver got %d, want 5 + 7", got)
	}
	if res.Height < 1 {
		t.Fatalf("result %+v", res)
	}
}
