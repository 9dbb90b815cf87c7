package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/wait"
)

// chainID is the chaos ledger's chain.
const chainID = "berth-chaos"

// Key names of the chaos ledger's funded accounts.
const (
	tenantKey = "tenant"
)

// providerNames are the two providers sharing the cluster: "a" is killed most, "b"
// now and then.
var providerNames = []string{"a", "b"}

// world is the running marketplace: the ledger node, the control plane, and the
// providers. The ledger node and the providers are processes of their own (`berth
// chain start`, `berth provider run`), so that stopping one is what it is on a real
// machine: its connections close with it.
type world struct {
	// run is the run's context: the processes started live until it ends.
	run    context.Context //nolint:containedctx // the processes' lifetime, for restarts made from shorter contexts
	cfg    Config
	log    *slog.Logger
	home   string // the ledger's home (and the keyring of every account)
	rpc    string
	ledger *child

	cp        *localenv.ControlPlane
	cs        kubernetes.Interface
	dc        dynamic.Interface
	kubeconfg string

	client *chain.Client
	tenant *chain.Broadcaster
	keys   *keys.Keyring

	providers map[string]*providerProc
}

// startWorld starts the ledger, the cluster and both providers, registered and ready.
func startWorld(ctx context.Context, cfg Config, log *slog.Logger) (_ *world, retErr error) {
	w := &world{run: ctx, cfg: cfg, log: log, home: filepath.Join(cfg.Dir, "ledger"), providers: map[string]*providerProc{}}
	defer func() {
		if retErr != nil {
			w.stop()
		}
	}()
	accounts := []string{tenantKey}
	for _, n := range providerNames {
		accounts = append(accounts, "provider-"+n)
	}
	if _, err := node.Init(w.home, node.InitOptions{ChainID: chainID, BlockInterval: cfg.BlockInterval, DevAccounts: accounts}); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	ports, err := localenv.FreePorts(ctx, 2)
	if err != nil {
		return nil, err
	}
	w.rpc = fmt.Sprintf("tcp://127.0.0.1:%d", ports[0])
	if err := node.SetListenAddresses(w.home, w.rpc, fmt.Sprintf("tcp://127.0.0.1:%d", ports[1])); err != nil {
		return nil, err
	}
	w.ledger = &child{name: "ledger node", bin: cfg.Berth, args: []string{"chain", "start", "--home", w.home, "--log-level", "warn"},
		logPath: filepath.Join(cfg.Dir, "ledger.log"), log: log}
	if err := w.ledger.start(w.run); err != nil {
		return nil, err
	}
	if err := w.waitLedger(ctx); err != nil {
		return nil, err
	}
	params, err := node.LoadGenesisParams(w.home)
	if err != nil {
		return nil, err
	}
	if w.keys, err = keys.Open(node.KeyringDir(w.home), params.AddressPrefix); err != nil {
		return nil, err
	}
	if w.client, err = chain.Dial(ctx, w.rpc); err != nil {
		return nil, err
	}
	signer, err := w.keys.Signer(tenantKey)
	if err != nil {
		return nil, err
	}
	if w.tenant, err = chain.NewBroadcaster(w.client, signer, chain.BroadcastOptions{Timeout: time.Minute}); err != nil {
		return nil, err
	}

	bin := cfg.KubeBinaries
	if bin == "" {
		if bin, err = localenv.FindBinaries(ctx); err != nil {
			return nil, err
		}
	}
	if w.cp, err = localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{Dir: filepath.Join(cfg.Dir, "cluster"), BinDir: bin, Logger: log}); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	specs := make([]localenv.NodeSpec, cfg.Nodes)
	for i := range specs {
		specs[i] = localenv.NodeSpec{Name: fmt.Sprintf("chaos-%d", i+1), CPU: "16", Memory: "64Gi"}
	}
	if err := w.cp.AddNodes(ctx, specs...); err != nil {
		return nil, err
	}
	w.kubeconfg = filepath.Join(cfg.Dir, "berth.kubeconfig")
	if err := localenv.WriteFlatKubeconfig(w.cp.KubeconfigPath, w.kubeconfg); err != nil {
		return nil, err
	}
	rc := w.cp.RESTConfig()
	rc.QPS, rc.Burst = 100, 200
	if w.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if w.dc, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}

	for _, n := range providerNames {
		p, err := w.newProvider(ctx, n)
		if err != nil {
			return nil, err
		}
		w.providers[n] = p
	}
	// Both start together (each installs the CRDs; only one is first).
	for _, p := range w.providers {
		if err := p.start(w.run); err != nil {
			return nil, err
		}
	}
	for _, p := range w.providers {
		if err := p.waitReady(ctx, w.cfg.StartTimeout); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// waitLedger waits until the ledger node answers and makes blocks.
func (w *world) waitLedger(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
	defer cancel()
	for {
		c, err := chain.Dial(ctx, w.rpc)
		if err == nil {
			var h int64
			if h, err = c.Height(ctx); err == nil {
				_, err = c.WaitHeight(ctx, h+1)
			}
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-w.ledger.exited():
			return fmt.Errorf("the ledger node exited while starting; its log ends:\n%s", tail(w.ledger.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("the ledger node does not answer: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restartLedger stops the ledger node (SIGTERM, or SIGKILL when kill), keeps it down
// for down, and starts it again.
func (w *world) restartLedger(ctx context.Context, down time.Duration, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if _, err := w.ledger.signal(sig, time.Minute); err != nil {
		return err
	}
	wait.Sleep(context.WithoutCancel(ctx), down)
	if err := w.ledger.start(w.run); err != nil {
		return err
	}
	return w.waitLedger(context.WithoutCancel(ctx))
}

// stop stops everything the world started; the provider processes first.
func (w *world) stop() {
	for _, p := range w.providers {
		p.stop()
	}
	if w.client != nil {
		w.client.Close()
	}
	if w.cp != nil {
		w.cp.Stop()
	}
	if w.ledger != nil {
		w.ledger.stop()
	}
}

// newProvider makes a provider's home (its key, provider.yaml) and registers it on
// the ledger with a gateway address of its own, kept across its restarts.
func (w *world) newProvider(ctx context.Context, name string) (*providerProc, error) {
	key := "provider-" + name
	home := filepath.Join(w.cfg.Dir, "provider-"+name)
	if err := os.MkdirAll(node.KeyringDir(home), 0o700); err != nil {
		return nil, err
	}
	// The provider's key only, copied from the ledger's keyring.
	b, err := os.ReadFile(filepath.Join(node.KeyringDir(w.home), key+".json"))
	if err != nil {
		return nil, fmt.Errorf("provider %s key: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(node.KeyringDir(home), key+".json"), b, 0o600); err != nil {
		return nil, err
	}
	info, err := w.keys.Show(key)
	if err != nil {
		return nil, err
	}
	ports, err := localenv.FreePorts(ctx, 2)
	if err != nil {
		return nil, err
	}
	listen, grpcListen := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfgPath := filepath.Join(home, "provider.yaml")
	yaml := fmt.Sprintf(`home: %q
from: %q
node: %q
kubeconfig: %q
log_level: info
gateway:
  listen: %q
  grpc_listen: %q
  manifest_timeout: %s
cluster:
  orphan_interval: 10s
  deploy_concurrency: 8
bidding:
  timeout: 5m
balance:
  check_interval: 10s
`, home, key, w.rpc, w.kubeconfg, listen, grpcListen, w.cfg.ManifestTimeout)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	signer, err := w.keys.Signer(key)
	if err != nil {
		return nil, err
	}
	br, err := chain.NewBroadcaster(w.client, signer, chain.BroadcastOptions{})
	if err != nil {
		return nil, err
	}
	hostURI := "https://" + listen
	msg := &ledger.MsgCreateProvider{Owner: info.Address, HostURI: hostURI, Attributes: market.Attributes{{Key: "region", Value: "chaos"}},
		Info: ledger.ProviderInfo{Website: "https://berth.dev"}}
	if _, err := br.Broadcast(ctx, msg); err != nil {
		return nil, fmt.Errorf("register provider %s: %w", name, err)
	}
	return &providerProc{
		child: &child{name: "provider " + name, bin: w.cfg.Berth, args: []string{"provider", "run", "--config", cfgPath},
			logPath: filepath.Join(w.cfg.Dir, "provider-"+name+".log"), log: w.log},
		addr: info.Address, hostURI: hostURI, client: w.client,
	}, nil
}
