package node_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestInitRefusesAnExistingHome(t *testing.T) {
	home := t.TempDir()
	if _, err := node.Init(home, node.InitOptions{Fast: true, DevAccounts: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	genesis, err := os.ReadFile(filepath.Join(home, "config", "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Init(home, node.InitOptions{}); err == nil {
		t.Fatal("a second init over the same home succeeded")
	}
	after, err := os.ReadFile(filepath.Join(home, "config", "genesis.json"))
	if err != nil || !bytes.Equal(genesis, after) {
		t.Fatalf("the refused init changed the genesis (%v)", err)
	}
	for _, bad := range []node.InitOptions{
		{ChainID: "bad chain id"},
		{BlockInterval: -time.Second},
		{Fund: []market.Coin{{Amount: 1, Denom: "x"}}, DevAccounts: []string{"a"}},
		{Fund: []market.Coin{{Amount: 1, Denom: "uakt"}, {Amount: 2, Denom: "uakt"}}, DevAccounts: []string{"a"}},
		{Fund: []market.Coin{{Amount: 0, Denom: "uact"}}, DevAccounts: []string{"a"}},
		{DevAccounts: []string{"p"}, DevAudits: []node.DevAudit{{Account: "q", Auditor: "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63", Attributes: market.Attributes{{Key: "host", Value: "akash"}}}}},
		{DevAccounts: []string{"p"}, DevAudits: []node.DevAudit{{Account: "p", Auditor: "akash1nope", Attributes: market.Attributes{{Key: "host", Value: "akash"}}}}},
		{DevAccounts: []string{"p"}, DevAudits: []node.DevAudit{{Account: "p", Auditor: "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63"}}},
		{DevAccounts: []string{"p"}, DevAudits: []node.DevAudit{{Account: "p", Auditor: "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63", Attributes: market.Attributes{{Key: "", Value: "x"}}}}},
		{DevAccounts: []string{"p"}, DevAudits: []node.DevAudit{
			{Account: "p", Auditor: "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63", Attributes: market.Attributes{{Key: "host", Value: "akash"}}},
			{Account: "p", Auditor: "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63", Attributes: market.Attributes{{Key: "tier", Value: "community"}}}}},
	} {
		// A refused init writes nothing: the directory stays empty, so a corrected
		// retry is not refused for keys it left behind.
		dir := t.TempDir()
		if _, err := node.Init(dir, bad); err == nil {
			t.Errorf("init %+v succeeded", bad)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("init %+v refused but left %v (%v)", bad, entries, err)
		}
	}
}

func TestStartWithoutHome(t *testing.T) {
	_, err := node.Start(node.Config{Home: t.TempDir()})
	if err == nil {
		t.Fatal("started a node without a home")
	}
}

// TestFourValidatorsAgree runs a network of four validators in this process, sends
// transactions to one, and checks that every validator commits the same blocks with
// the same app hash.
func TestFourValidatorsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: four validators")
	}
	const n = 4
	dir := t.TempDir()
	ports := make([]int, n)
	for i := range ports {
		p, err := testenv.FreePort(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	res, err := node.InitNetwork(dir, node.NetworkOptions{
		InitOptions: node.InitOptions{ChainID: "berth-net", Fast: true, DevAccounts: []string{"tenant", "provider"}},
		Validators:  n, P2PPorts: ports, RPCPorts: ports, // RPC is overridden with sockets below
	})
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "berth-net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	nodes := make([]*node.Node, n)
	for i, r := range res {
		nd, err := node.Start(node.Config{Home: r.Home, RPCListen: "unix://" + filepath.Join(sockDir, strconv.Itoa(i)+".sock")})
		if err != nil {
			t.Fatalf("start validator %d: %v", i, err)
		}
		nodes[i] = nd
		t.Cleanup(func() {
			if err := nd.Stop(); err != nil {
				t.Errorf("stop validator %d: %v", i, err)
			}
		})
	}
	c, err := dialWhenReady(t, nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(node.KeyringDir(res[0].Home), ledger.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	key, err := kr.Signer("tenant")
	if err != nil {
		t.Fatal(err)
	}
	br, err := chain.NewBroadcaster(c, key, chain.BroadcastOptions{})
	if err != nil {
		t.Fatal(err)
	}
	to, err := kr.Show("provider")
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 5 {
		r, err := br.Broadcast(t.Context(), &ledger.MsgSend{From: br.Address(), To: to.Address, Amount: []market.Coin{{Amount: market.Uint(i + 1), Denom: ledger.DefaultDenom}}})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		last = r.Height
	}
	// Every validator reaches the height and reports the same app hash there.
	waitCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, nd := range nodes {
		if err := nd.WaitHeight(waitCtx, last); err != nil {
			t.Fatalf("validator %s: %v", nd.Home(), err)
		}
	}
	var want []byte
	for i := range nodes {
		cv, err := dialWhenReady(t, nodes[i])
		if err != nil {
			t.Fatal(err)
		}
		br, err := cv.BlockResults(t.Context(), last)
		if err != nil {
			t.Fatalf("validator %d: %v", i, err)
		}
		var acc ledger.AccountResponse
		if err := ledger.QueryAccount.Into(t.Context(), cv, ledger.AccountRequest{Address: to.Address}, &acc); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want = br.AppHash
		} else if !bytes.Equal(br.AppHash, want) {
			t.Fatalf("validator %d app hash at height %d is %X, validator 0 has %X", i, last, br.AppHash, want)
		}
		if got := acc.Balance(ledger.DefaultDenom); got != 1_000_000_000_000+15 {
			t.Fatalf("validator %d: balance %v, want 1000000000015%s", i, acc.Balances, ledger.DefaultDenom)
		}
	}
}

// dialWhenReady waits for the node's first block (its RPC is up and its genesis state
// queryable), then dials it.
func dialWhenReady(t *testing.T, nd *node.Node) (*chain.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := nd.WaitHeight(ctx, 1); err != nil {
		return nil, err
	}
	c, err := chain.Dial(ctx, nd.RPC())
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

// A node that cannot start (its p2p port is taken) stops what it started and leaves
// its home usable.
func TestStartFailsCleanly(t *testing.T) {
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	home := t.TempDir()
	sock := filepath.Join(t.TempDir(), "r.sock")
	if len(sock) > 100 {
		t.Skip("temp dir too long for a unix socket")
	}
	if _, err := node.Init(home, node.InitOptions{Fast: true, RPCListen: "unix://" + sock, P2PListen: "tcp://" + ln.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Start(node.Config{Home: home}); err == nil {
		t.Fatal("started on a port in use")
	}
	p, err := testenv.FreePort(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{Home: home, P2PListen: "tcp://127.0.0.1:" + strconv.Itoa(p)})
	if err != nil {
		t.Fatalf("start after the failure: %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestInitNetworkPorts(t *testing.T) {
	dir := t.TempDir()
	res, err := node.InitNetwork(dir, node.NetworkOptions{
		InitOptions: node.InitOptions{DevAccounts: []string{"tenant", "provider"}},
		Validators:  3, Hosts: []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ p2p, rpc, peers string }{
		{"tcp://0.0.0.0:26656", "tcp://127.0.0.1:26657", "@10.0.0.1:26666,"},
		{"tcp://0.0.0.0:26666", "tcp://127.0.0.1:26667", "@10.0.0.1:26656,"},
		{"tcp://0.0.0.0:26656", "tcp://127.0.0.1:26657", "@10.0.0.1:26666"},
	}
	for i, r := range res {
		c, err := node.LoadConfig(r.Home)
		if err != nil {
			t.Fatal(err)
		}
		if c.P2P.ListenAddress != want[i].p2p || c.RPC.ListenAddress != want[i].rpc || !strings.Contains(c.P2P.PersistentPeers, want[i].peers) {
			t.Errorf("node%d: p2p %s rpc %s peers %s; want %+v", i, c.P2P.ListenAddress, c.RPC.ListenAddress, c.P2P.PersistentPeers, want[i])
		}
		if strings.Contains(c.P2P.PersistentPeers, r.NodeID) {
			t.Errorf("node%d lists itself as a peer", i)
		}
	}
	if len(res[0].Accounts) != 2 || res[1].Accounts != nil {
		t.Errorf("dev accounts: node0 %d, node1 %d", len(res[0].Accounts), len(res[1].Accounts))
	}
}

// TestStartTwiceSaysWhy: a home already running refuses a second node with the reason:
// which process runs it, and what to do.
func TestStartTwiceSaysWhy(t *testing.T) {
	home := t.TempDir()
	if _, err := node.Init(home, node.InitOptions{Fast: true, RPCListen: "tcp://127.0.0.1:0", P2PListen: "tcp://127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	_, err = node.Start(node.Config{Home: home})
	if !errors.Is(err, node.ErrHomeInUse) {
		t.Fatalf("second start: %v, want ErrHomeInUse", err)
	}
	for _, want := range []string{"process " + strconv.Itoa(os.Getpid()), "runs the ledger node of " + home, "another --home"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second start: %q lacks %q", err, want)
		}
	}
	// The first node still runs, and the home is free once it stops.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n2, err := node.Start(node.Config{Home: home})
	if err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	if err := n2.Stop(); err != nil {
		t.Fatal(err)
	}
}
