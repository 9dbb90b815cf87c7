package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/node"
)

// LedgerNode is a single-validator ledger node running in the test's process, in a
// temporary home, with the test settings (a block as soon as there is a transaction,
// none otherwise). Its RPC listens on a unix socket; p2p on a free loopback port.
type LedgerNode struct {
	*node.Node
	Keys     *keys.Keyring
	Accounts map[string]keys.Info
	cfg      node.Config
}

// LedgerOptions adjust the chain a test starts.
type LedgerOptions struct {
	// Accounts are dev account names, funded at genesis (default tenant, provider).
	Accounts []string
	// Params replace the default params.
	Params *ledger.Params
	// BlockInterval, when set, makes a block every interval (empty blocks included)
	// instead of the test settings.
	BlockInterval time.Duration
}

// Ledger starts a node for the test and stops it when the test ends.
func Ledger(t testing.TB, o LedgerOptions) *LedgerNode {
	t.Helper()
	if len(o.Accounts) == 0 {
		o.Accounts = []string{"tenant", "provider"}
	}
	home := t.TempDir()
	// Unix socket paths are limited to about 100 bytes; test temp dirs can be longer.
	sockDir, err := os.MkdirTemp("", "berth-rpc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	p2p, err := FreePort(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := node.Init(home, node.InitOptions{
		ChainID: "berth-test", Fast: o.BlockInterval == 0, BlockInterval: o.BlockInterval, DevAccounts: o.Accounts, Params: o.Params,
		RPCListen: "unix://" + filepath.Join(sockDir, "rpc.sock"),
		P2PListen: "tcp://127.0.0.1:" + strconv.Itoa(p2p),
	})
	if err != nil {
		t.Fatalf("init ledger node: %v", err)
	}
	kr, err := keys.Open(node.KeyringDir(home), ledger.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	l := &LedgerNode{Keys: kr, Accounts: map[string]keys.Info{}, cfg: node.Config{Home: home, Logger: testLogger()}}
	for _, a := range res.Accounts {
		l.Accounts[a.Name] = a
	}
	l.start(t)
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("stop ledger node: %v", err)
		}
	})
	l.awaitFirstBlock(t)
	return l
}

func (l *LedgerNode) start(t testing.TB) {
	t.Helper()
	n, err := node.Start(l.cfg)
	if err != nil {
		t.Fatalf("start ledger node: %v", err)
	}
	l.Node = n
}

func (l *LedgerNode) awaitFirstBlock(t testing.TB) {
	t.Helper()
	// The genesis state is queryable once the first block is committed, which a new
	// chain makes at once even with empty blocks off.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := l.WaitHeight(ctx, 1); err != nil {
		t.Fatalf("ledger node: %v", err)
	}
}

// Restart stops the node and starts it again from the same home. Clients dialled
// before must dial again (see node.Node.Stop).
func (l *LedgerNode) Restart(t testing.TB) {
	t.Helper()
	if err := l.Stop(); err != nil {
		t.Fatalf("stop ledger node: %v", err)
	}
	l.Start(t)
}

// Start starts the node again, after Stop, from the same home, and waits until it
// serves its state.
func (l *LedgerNode) Start(t testing.TB) {
	t.Helper()
	l.start(t)
	l.awaitFirstBlock(t)
}

// Client dials the node (waiting for its first block).
func (l *LedgerNode) Client(t testing.TB) *chain.Client {
	t.Helper()
	c, err := chain.Dial(t.Context(), l.RPC())
	if err != nil {
		t.Fatalf("dial ledger node: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Broadcaster returns a broadcaster signing as the named dev account.
func (l *LedgerNode) Broadcaster(t testing.TB, c *chain.Client, name string) *chain.Broadcaster {
	t.Helper()
	key, err := l.Keys.Signer(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := chain.NewBroadcaster(c, key, chain.BroadcastOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Address is a dev account's address.
func (l *LedgerNode) Address(t testing.TB, name string) string {
	t.Helper()
	a, ok := l.Accounts[name]
	if !ok {
		t.Fatalf("no dev account %q", name)
	}
	return a.Address
}

// KeyHome makes a berth home (a temporary directory) whose keyring holds the dev key
// name, as a provider's or tenant's own machine would, and returns its path.
func (l *LedgerNode) KeyHome(t testing.TB, name string) string {
	t.Helper()
	home := t.TempDir()
	exported, err := l.Keys.Export(name)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(node.KeyringDir(home), ledger.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.ImportExported(name, exported); err != nil {
		t.Fatal(err)
	}
	return home
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port //nolint:errcheck // a TCP listener's address is a *net.TCPAddr
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return port, nil
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
