// Package node runs the ledger: a CometBFT v0.38 node with the berth marketplace
// application (internal/ledger) in the same process. It initialises node homes (one
// validator, or a network of several), starts a node from a home, and stops it
// cleanly enough that the same process can start it again (the tests restart nodes).
//
// A Node is started once and stopped once; its methods are safe for concurrent use.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	dbm "github.com/cometbft/cometbft-db"
	cfg "github.com/cometbft/cometbft/config"
	cmtlog "github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/libs/service"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/proxy"
	"github.com/cometbft/cometbft/types"
	"github.com/gorilla/websocket"
	"github.com/spf13/viper"

	"berth.dev/berth/internal/ledger"
)

// Config says which home to run and how.
type Config struct {
	// Home is a directory made by Init or InitNetwork.
	Home string
	// Logger receives the node's logs; CometBFT's informational chatter is logged at
	// debug level, its errors at error level. Nil discards them.
	Logger *slog.Logger
	// RPCListen and P2PListen override the home's config.toml when set
	// ("tcp://127.0.0.1:PORT" or, for RPC, "unix:///path/to.sock").
	RPCListen string
	P2PListen string
	// Lock is the home's node lock (LockHome with PartNode) when the caller took it
	// before writing into the home, as berth dev does; the caller keeps it. Nil: Start
	// takes it, so that a home another process runs is refused before anything is
	// opened, and Stop releases it.
	Lock *HomeLock
}

// Node is a running ledger node.
type Node struct {
	cmt     *nm.Node
	app     *ledger.App
	appDB   dbm.DB
	conf    *cfg.Config
	chainID string

	stopMu   sync.Mutex // held for the whole of Stop, so every caller returns after it
	mu       sync.Mutex
	dbs      []dbm.DB
	lock     *HomeLock // taken by Start, released by Stop (nil: the caller's)
	stopped  bool
	stopping *atomic.Bool // read by the logger: errors while stopping are expected
}

// appDBName is the application's database in the home's data directory.
const appDBName = "ledger"

// LoadConfig reads the home's config.toml.
func LoadConfig(home string) (*cfg.Config, error) {
	path := filepath.Join(home, "config", "config.toml")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("node home %s: %w (run berth chain init first)", home, err)
	}
	v := viper.New()
	v.SetConfigFile(path)
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	conf := cfg.DefaultConfig()
	if err := v.Unmarshal(conf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	conf.SetRoot(home)
	if err := conf.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return conf, nil
}

// Start opens the home and starts the node. It returns once the node runs (its first
// block may still be coming).
func Start(c Config) (_ *Node, retErr error) {
	conf, err := LoadConfig(c.Home)
	if err != nil {
		return nil, err
	}
	if c.RPCListen != "" {
		conf.RPC.ListenAddress = c.RPCListen
	}
	if c.P2PListen != "" {
		conf.P2P.ListenAddress = c.P2PListen
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{conf: conf, stopping: new(atomic.Bool)}
	if c.Lock == nil {
		if n.lock, err = LockHome(c.Home, PartNode); err != nil {
			return nil, err
		}
		defer func() {
			if retErr != nil {
				n.lock.Release()
			}
		}()
	}
	appDB, err := dbm.NewDB(appDBName, dbm.BackendType(conf.DBBackend), conf.DBDir())
	if errors.Is(err, syscall.EAGAIN) {
		// goleveldb locks its directory: another process runs this home without the
		// home's lock (a berth from before the lock).
		return nil, fmt.Errorf("open ledger database in %s: another process (berth chain start, berth dev) is running this home: %w", conf.DBDir(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("open ledger database in %s: %w", conf.DBDir(), err)
	}
	n.appDB = appDB
	app, err := ledger.NewApp(appDB, log.With(slog.String("module", "ledger")))
	if err != nil {
		_ = appDB.Close()
		return nil, err
	}
	n.app = app
	nodeKey, err := p2p.LoadNodeKey(conf.NodeKeyFile())
	if err != nil {
		_ = appDB.Close()
		return nil, fmt.Errorf("node key: %w", err)
	}
	// LoadFilePV exits the process on a missing or unreadable file: check first.
	for _, f := range []string{conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile()} {
		if _, err := os.Stat(f); err != nil {
			_ = appDB.Close()
			return nil, fmt.Errorf("validator key: %w", err)
		}
	}
	pv := privval.LoadFilePV(conf.PrivValidatorKeyFile(), conf.PrivValidatorStateFile())
	genesis := nm.DefaultGenesisDocProviderFunc(conf)
	gd, err := genesis()
	if err != nil {
		_ = appDB.Close()
		return nil, fmt.Errorf("genesis: %w", err)
	}
	n.chainID = gd.ChainID
	cmt, err := nm.NewNode(conf, pv, nodeKey,
		proxy.NewConnSyncLocalClientCreator(app),
		genesis,
		n.dbProvider,
		nm.DefaultMetricsProvider(conf.Instrumentation),
		cometLogger{l: log.With(slog.String("module", "cometbft")), stopping: n.stopping},
	)
	if err != nil {
		n.closeDBs()
		return nil, fmt.Errorf("start node: %w", err)
	}
	n.cmt = cmt
	if err := cmt.Start(); err != nil {
		// The node started its event bus, indexer and perhaps its RPC before failing
		// (a p2p port in use, say): stop what it started.
		n.stopping.Store(true)
		cmt.OnStop()
		n.closeDBs()
		return nil, fmt.Errorf("start node: %w", err)
	}
	return n, nil
}

// dbProvider opens CometBFT's databases and remembers them: CometBFT does not close
// all of them on Stop (the transaction index stays open), which would keep the next
// start in the same process from opening them.
func (n *Node) dbProvider(ctx *cfg.DBContext) (dbm.DB, error) {
	raw, err := cfg.DefaultDBProvider(ctx)
	if err != nil {
		return nil, err
	}
	db := &guardedDB{DB: raw}
	n.mu.Lock()
	n.dbs = append(n.dbs, db)
	n.mu.Unlock()
	return db, nil
}

// guardedDB makes reads after Close answer "not found" instead of failing: CometBFT's
// per-peer consensus routines can still read the block store for a moment after the
// node closed it while stopping, and a failed read there panics the process.
type guardedDB struct {
	dbm.DB
	mu     sync.RWMutex
	closed bool
}

func (g *guardedDB) Get(key []byte) ([]byte, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, nil
	}
	return g.DB.Get(key)
}

func (g *guardedDB) Has(key []byte) (bool, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return false, nil
	}
	return g.DB.Has(key)
}

func (g *guardedDB) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.DB.Close()
}

func (n *Node) closeDBs() {
	n.mu.Lock()
	dbs := n.dbs
	n.dbs = nil
	n.mu.Unlock()
	for _, db := range dbs {
		_ = db.Close() // some were closed by CometBFT already
	}
	_ = n.appDB.Close()
}

// Stop stops the node and closes its databases. It is safe to call more than once.
// CometBFT closes its RPC listeners but keeps serving connections already open, from
// the stopped node: clients must dial again after a node is restarted in the same
// process.
func (n *Node) Stop() error {
	n.stopMu.Lock()
	defer n.stopMu.Unlock()
	if n.stopped {
		return nil
	}
	n.stopped = true
	n.stopping.Store(true)
	var err error
	if n.cmt.IsRunning() {
		err = n.cmt.Stop()
		n.cmt.Wait()
	}
	n.closeDBs()
	n.lock.Release()
	return err
}

// Run blocks until ctx ends, then stops the node.
func (n *Node) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-n.cmt.Quit():
	}
	return n.Stop()
}

// RPC is the node's RPC listen address, for internal/chain: "tcp://127.0.0.1:26657"
// or "unix:///…/rpc.sock".
func (n *Node) RPC() string { return n.conf.RPC.ListenAddress }

// ChainID is the chain's ID from genesis.
func (n *Node) ChainID() string { return n.chainID }

// App is the ledger application the node runs.
func (n *Node) App() *ledger.App { return n.app }

// Home is the node's home directory.
func (n *Node) Home() string { return n.conf.RootDir }

var waiters atomic.Uint64

// WaitHeight blocks until the application has committed height h (or ctx ends). It
// listens to the node's own new-block events, which CometBFT fires after each commit.
func (n *Node) WaitHeight(ctx context.Context, h int64) error {
	subscriber := "berth-wait-" + strconv.FormatUint(waiters.Add(1), 10)
	sub, err := n.cmt.EventBus().Subscribe(ctx, subscriber, types.EventQueryNewBlock, 1)
	if err != nil {
		return fmt.Errorf("wait for height %d: %w", h, err)
	}
	defer func() { _ = n.cmt.EventBus().UnsubscribeAll(context.WithoutCancel(ctx), subscriber) }()
	for n.app.Height() < h {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for height %d (at %d): %w", h, n.app.Height(), ctx.Err())
		case <-sub.Canceled():
			return fmt.Errorf("wait for height %d: the node stopped (%w)", h, sub.Err())
		case <-sub.Out():
		}
	}
	return nil
}

// NodeID is the node's p2p ID.
func (n *Node) NodeID() string { return string(n.cmt.NodeInfo().ID()) }

// cometLogger writes CometBFT's logs to slog: its Info is chatty (every block, every
// peer message), so it goes to Debug.
type cometLogger struct {
	l        *slog.Logger
	stopping *atomic.Bool
}

// The adapter passes CometBFT's messages and key-value pairs through as they are.
//
//nolint:sloglint // the messages are CometBFT's
func (c cometLogger) Debug(msg string, kv ...any) { c.l.Debug(msg, kv...) }

//nolint:sloglint // the messages are CometBFT's
func (c cometLogger) Info(msg string, kv ...any) { c.l.Debug(msg, kv...) }

//nolint:sloglint // the messages are CometBFT's
func (c cometLogger) Error(msg string, kv ...any) {
	// A stopping node logs the connections and services it closes as errors; they
	// are not.
	if c.stopping.Load() || isShutdownNoise(kv) {
		c.l.Debug(msg, kv...)
		return
	}
	c.l.Error(msg, kv...)
}
func (c cometLogger) With(kv ...any) cmtlog.Logger {
	return cometLogger{l: c.l.With(kv...), stopping: c.stopping}
}

func isShutdownNoise(kv []any) bool {
	for _, v := range kv {
		err, ok := v.(error)
		if !ok {
			continue
		}
		// Clients going away: the RPC server reports the writes it cannot finish.
		if errors.Is(err, context.Canceled) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, service.ErrAlreadyStopped) ||
			errors.Is(err, websocket.ErrCloseSent) || strings.Contains(err.Error(), "use of closed network connection") {
			return true
		}
	}
	return false
}
