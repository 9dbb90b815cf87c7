package dev

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/kubeconfig"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/wait"
	"berth.dev/berth/internal/yaml"
)

// devProcesses is berth dev's multi-process layout (--redis): redis-server, and the
// provider and the three operators each a process of its own (this berth binary, as
// `berth provider run` and `berth operator NAME` with files berth dev writes), their
// bus topics over Redis. Each is restarted when it exits on its own (logged, with its
// log's last lines); one that keeps exiting stops berth dev.
type devProcesses struct {
	dir             string // configuration files and logs
	redis           *localenv.Service
	redisAddr       string
	provider        *localenv.Service
	operators       []*localenv.Service // hostname, ip, inventory
	client          *chain.Client
	providerAddr    string
	hostURI, grpc   string
	metrics         string
	operatorAddrs   [3]string // hostname, ip, inventory: probes and metrics
	manifestTimeout time.Duration
}

// all are the processes started, the provider first, Redis last.
func (d *devProcesses) all() []*localenv.Service {
	var out []*localenv.Service
	if d.provider != nil {
		out = append(out, d.provider)
	}
	out = append(out, d.operators...)
	if d.redis != nil {
		out = append(out, d.redis)
	}
	return out
}

// failed is closed when one of the processes is no longer restarted (err says why),
// until ctx ends.
func (d *devProcesses) failed(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	for _, s := range d.all() {
		go func() {
			select {
			case <-s.Failed():
				once.Do(func() { close(ch) })
			case <-ctx.Done():
			}
		}()
	}
	return ch
}

// err is why the first failed process is no longer restarted (nil: none failed).
func (d *devProcesses) err() error {
	for _, s := range d.all() {
		if err := s.Err(); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the processes, the provider first (it finishes what it was doing on
// SIGTERM), Redis last.
func (d *devProcesses) stop() {
	for _, s := range d.all() {
		s.Stop()
	}
	if d.client != nil {
		d.client.Close()
	}
}

// startDevProcesses starts the multi-process layout on the running ledger (rpc) and
// cluster: it installs berth's CRDs and the operators' namespace, registers the
// provider with its gateway's address, writes each process's file under
// HOME/cluster/processes, and starts them. On error nothing it started is left.
func startDevProcesses(ctx context.Context, cfg Config, pc config.ProviderConfig, rpc, chainID, kubeconfigPath, clusterDir string, log *slog.Logger) (_ *devProcesses, retErr error) {
	bin, err := devExecutable(cfg, "--redis")
	if err != nil {
		return nil, err
	}
	d := &devProcesses{dir: filepath.Join(clusterDir, "processes")}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			d.stop()
		}
	}()
	redisDir := filepath.Join(d.dir, "redis")
	if err := os.MkdirAll(redisDir, 0o700); err != nil {
		return nil, err
	}
	if d.redis, d.redisAddr, err = localenv.StartRedisService(ctx, redisDir, log.With(slog.String("component", "redis"))); err != nil {
		return nil, err
	}
	bus := "redis://" + d.redisAddr
	if err := prepareDevCluster(ctx, kubeconfigPath); err != nil {
		return nil, err
	}

	// The provider: its gateway's address is chosen here, to register it first.
	ports, err := localenv.FreePorts(ctx, 7)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	var bcast *chain.Broadcaster
	if d.client, bcast, err = devBroadcaster(ctx, rpc, pc); err != nil {
		return nil, err
	}
	d.providerAddr, d.hostURI, d.grpc, d.metrics = bcast.Address(), "https://"+addr(0), addr(1), addr(2)
	attrs, err := pc.Registered()
	if err != nil {
		return nil, err
	}
	if err := registerDevProvider(ctx, d.client, bcast, d.hostURI, attrs); err != nil {
		return nil, err
	}
	pc.Node, pc.Kubeconfig, pc.LogLevel = rpc, kubeconfigPath, "info"
	pc.Gateway.Listen, pc.Gateway.GRPCListen = addr(0), addr(1)
	pc.Bus.Redis = bus
	d.manifestTimeout = pc.Gateway.ManifestTimeout
	providerFile, err := writeDevFile(d.dir, "provider.yaml", pc)
	if err != nil {
		return nil, err
	}
	start := func(name string, args ...string) (*localenv.Service, error) {
		return localenv.StartService(localenv.ServiceOptions{Name: name, Bin: bin, Args: args, LogDir: d.dir, Log: log})
	}
	if d.provider, err = start("provider", "provider", "run", "--config", providerFile, "--metrics-listen", d.metrics); err != nil {
		return nil, err
	}

	// The operators, on the CRDs installed above.
	hc := devHostnameConfig(pc, d.providerAddr, chainID, kubeconfigPath)
	hc.Listen = addr(3)
	ic := devIPConfig(d.providerAddr, chainID, kubeconfigPath, addr(4))
	vc := devInventoryConfig(kubeconfigPath, addr(5))
	vc.Bus.Redis = bus
	for i, op := range []struct {
		name string
		cfg  any
	}{{"hostname", hc}, {"ip", ic}, {"inventory", vc}} {
		file, err := writeDevFile(d.dir, op.name+"-operator.yaml", op.cfg)
		if err != nil {
			return nil, err
		}
		s, err := start(op.name+"-operator", "operator", op.name, "--config", file)
		if err != nil {
			return nil, err
		}
		d.operators = append(d.operators, s)
		d.operatorAddrs[i] = addr(3 + i)
	}
	return d, nil
}

// devExecutable is the berth binary berth dev runs (--redis) or makes an image of
// (--chart): cfg.Executable, else this one.
func devExecutable(cfg Config, flag string) (string, error) {
	if cfg.Executable != "" {
		return cfg.Executable, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("%s: this berth binary: %w", flag, err)
	}
	return exe, nil
}

// devBroadcaster connects to the ledger node (rpc) and signs with the provider's key
// (pc.From in the home's keyring), for the provider's registration. The client is the
// caller's to close, also on error.
func devBroadcaster(ctx context.Context, rpc string, pc config.ProviderConfig) (*chain.Client, *chain.Broadcaster, error) {
	client, err := chain.Dial(ctx, rpc)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger node: %w", err)
	}
	kr, err := keys.Open(node.KeyringDir(pc.Home), client.Params().AddressPrefix)
	if err != nil {
		return client, nil, err
	}
	signer, err := kr.Signer(pc.From)
	if err != nil {
		return client, nil, fmt.Errorf("key %q: %w", pc.From, err)
	}
	bcast, err := chain.NewBroadcaster(client, signer, chain.BroadcastOptions{})
	return client, bcast, err
}

// restConfig is the client configuration of the dev cluster's kubeconfig at path.
func restConfig(path string) (*rest.Config, error) { return kubeconfig.Load(path) }

// kubeClient is a client of the dev cluster's kubeconfig.
func kubeClient(path string) (kubernetes.Interface, error) {
	rc, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// prepareDevCluster installs berth's CRDs and the operators' namespace, so that the
// provider and the operators, starting together, find them.
func prepareDevCluster(ctx context.Context, path string) error {
	rc, err := restConfig(path)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := kube.InstallCRDs(ctx, dc); err != nil {
		return err
	}
	return ensureOperatorNamespace(ctx, rc)
}

// writeDevFile writes a process's configuration (YAML, the keys it reads) in dir.
func writeDevFile(dir, name string, cfg any) (string, error) {
	b, err := yaml.Encode(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append([]byte("# written by berth dev --redis at each start\n"), b...), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// awaitBidding waits until the provider process serves and bids (its inventory
// operator's first report has arrived), or says why not after timeout; a process that
// stops being restarted ends the wait at once.
func (d *devProcesses) awaitBidding(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := awaitBidding(ctx, d.hostURI, d.failed(ctx), d.err)
	if _, ended := errors.AsType[*wait.Ended](err); ended {
		return fmt.Errorf("the provider process is not bidding after %s: %w (its log: %s)", timeout, err, d.provider.LogPath())
	}
	return err
}

// awaitBidding waits until the provider at hostURI serves its status and says it bids,
// until ctx ends (a *wait.Ended) or failed is closed (why's error).
func awaitBidding(ctx context.Context, hostURI string, failed <-chan struct{}, why func() error) error {
	return wait.Until(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-failed:
			return wait.Abort(why())
		default:
		}
		st, err := status.Read(ctx, status.LoopbackClient, hostURI)
		switch {
		case err != nil:
			return err
		case st.Berth.NotBidding != "":
			return errors.New(st.Berth.NotBidding)
		}
		return nil
	})
}
