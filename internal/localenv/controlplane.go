package localenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"berth.dev/berth/internal/kubeconfig"
)

// ControlPlaneOptions configures StartControlPlane.
type ControlPlaneOptions struct {
	// Dir holds certificates, kubeconfigs, etcd data and process logs. Empty: a new
	// temporary directory, removed by Stop.
	Dir string
	// BinDir holds the binaries; empty: FindBinaries.
	BinDir string
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds the whole start-up (default 2 minutes).
	StartTimeout time.Duration
	// Throughput lifts the control plane's own limits so that a benchmark measures its
	// client rather than the simulator: the controller manager's and the scheduler's
	// client rate limits (5,000 QPS, burst 10,000, as kwokctl's disableQPSLimits), the
	// API server's in-flight request limits, and kwok's parallelism (16 workers each).
	Throughput bool
	// Restart is what happens when a process exits once the control plane runs
	// (default: restarts with backoff, at most 5 per process in 10 minutes; etcd never).
	Restart RestartPolicy
	// Persistent keeps the cluster in Dir (required) from one start to the next: etcd's
	// data and the service-account signing key are reused when Dir holds them (the
	// certificates, kubeconfigs and kwok's files are made anew, as are the ports), and
	// etcd syncs every write to disk, so what the API server acknowledged survives a
	// crash of this machine. Without it Dir is emptied at start and etcd runs with
	// --unsafe-no-fsync: nothing of the cluster outlives it.
	Persistent bool
}

// ControlPlane is a running private Kubernetes control plane with kwok.
type ControlPlane struct {
	// Dir is the state directory (see ControlPlaneOptions.Dir).
	Dir string
	// KubeconfigPath is an admin (system:masters) kubeconfig for this cluster.
	KubeconfigPath string
	// APIServerURL is the https URL of kube-apiserver on 127.0.0.1.
	APIServerURL string
	// ContainerLogFile is the file kwok serves as every container's log (CRI format:
	// "<RFC3339Nano> stdout F <line>"); `kubectl logs` streams it.
	ContainerLogFile string
	// ExecDir is the working directory of commands run by `kubectl exec`: they run on
	// this host, as the user running the control plane, with or without a terminal
	// (the node server runs them: nodeserver.go).
	ExecDir string
	// Resumed says a persistent control plane started on the cluster of an earlier start
	// (ControlPlaneOptions.Persistent): its objects are all there.
	Resumed bool

	cfg       *rest.Config
	tlsClient *http.Client
	pki       *pki   // the cluster's CA, which real nodes' credentials are issued by
	binDir    string // the binaries, real nodes' kubelet and kube-proxy among them

	mu      sync.Mutex // guards procs (a restart replaces one) and nodes
	procs   []*process
	nodes   []*RealNode // real nodes started and not yet stopped (realnode.go)
	node    *nodeServer // the simulated nodes' kubelet endpoint, in front of kwok
	removed atomic.Bool
	log     *slog.Logger

	// Supervision (supervise.go): one goroutine per process from the end of start-up
	// until Stop, which closes stopping and waits for them.
	restart  RestartPolicy
	stopping chan struct{}
	wg       sync.WaitGroup
	failed   chan struct{}
	smu      sync.Mutex // guards err, history
	err      error
	history  map[string]*restartHistory // restarts, by process

	stopOnce sync.Once
}

const (
	// kwokNodeAnnotation marks the nodes kwok simulates.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	// ServiceCIDR is the cluster's service IP range; nothing listens there.
	ServiceCIDR = "10.96.0.0/16"
	// PodCIDR is the range kwok draws its fake pod IPs from; nothing listens there.
	PodCIDR = "10.244.0.1/16"
)

// StartControlPlane starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok on free loopback ports, and returns once the API server is ready and the
// controllers serve. The caller must call Stop. Start-up is retried when a port chosen
// as free was taken before a process could bind it.
func StartControlPlane(ctx context.Context, opts ControlPlaneOptions) (*ControlPlane, error) {
	if opts.Persistent && opts.Dir == "" {
		return nil, errors.New("a persistent control plane needs a directory (ControlPlaneOptions.Dir)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.BinDir == "" {
		dir, err := FindBinaries(ctx)
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	return onFreePorts(func() (*ControlPlane, error) { return startControlPlane(ctx, opts) }, func(err error) {
		opts.Logger.WarnContext(ctx, "control plane port taken, retrying", slog.String("error", err.Error()))
	})
}

func newControlPlane(dir string, removeDir bool, log *slog.Logger, restart RestartPolicy) *ControlPlane {
	restart.defaults()
	cp := &ControlPlane{Dir: dir, log: log, restart: restart,
		stopping: make(chan struct{}), failed: make(chan struct{}), history: map[string]*restartHistory{}}
	cp.removed.Store(removeDir)
	return cp
}

func startControlPlane(ctx context.Context, opts ControlPlaneOptions) (_ *ControlPlane, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	dir, removeDir, resumed, err := controlPlaneDir(opts.Dir, opts.Persistent)
	if err != nil {
		return nil, err
	}
	cp := newControlPlane(dir, removeDir, opts.Logger, opts.Restart)
	cp.Resumed = resumed
	defer func() {
		if retErr != nil {
			cp.Stop()
		}
	}()
	ports, err := FreePorts(ctx, 6)
	if err != nil {
		return nil, err
	}
	st := &cpStart{opts: opts, cp: cp, logs: filepath.Join(dir, "logs"),
		etcdClient: ports[0], etcdPeer: ports[1], apiPort: ports[2], kcmPort: ports[3], schedPort: ports[4], kwokPort: ports[5]}
	cp.APIServerURL = "https://" + hostPort(st.apiPort)
	if st.files, err = writeControlPlaneFiles(dir, opts.BinDir, cp.APIServerURL, opts.Throughput, opts.Persistent); err != nil {
		return nil, err
	}
	cp.KubeconfigPath, cp.ContainerLogFile, cp.ExecDir = st.files.adminKubeconfig, st.files.containerLog, st.files.execDir
	cp.pki, cp.binDir = st.files.pki, opts.BinDir
	if err := os.MkdirAll(st.logs, 0o700); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	defer st.closeClients()
	for _, step := range []func(context.Context) error{st.startEtcd, st.startAPIServer, st.startControllers, st.startKwok, st.awaitHealthy} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	for _, p := range cp.procs {
		cp.supervise(p)
	}
	opts.Logger.InfoContext(ctx, "control plane ready", slog.String("apiserver", cp.APIServerURL), slog.String("kubeconfig", cp.KubeconfigPath))
	return cp, nil
}

// controlPlaneDir is the control plane's directory: a new temporary one (removed at
// Stop) when dir is empty; else dir, emptied (stale etcd data would not match new
// keys) unless persistent, which keeps etcd's data, the service-account keys and the
// logs and says whether there was a cluster to resume.
func controlPlaneDir(dir string, persistent bool) (_ string, removeDir, resumed bool, _ error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "berth-kube-")
		if err != nil {
			return "", false, false, fmt.Errorf("create control plane dir: %w", err)
		}
		return d, true, false, nil
	}
	// A real node of a run that was killed keeps running containers, with mounts,
	// under the directory: ended first, never removed through.
	if err := abandonedNodes(dir); err != nil {
		return "", false, false, fmt.Errorf("clean control plane dir: %w", err)
	}
	keep := map[string]bool{}
	if persistent {
		keep = map[string]bool{"etcd": true, "logs": true, "pki": true}
		_, err := os.Stat(filepath.Join(dir, "etcd", "member"))
		resumed = err == nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, false, fmt.Errorf("clean control plane dir: %w", err)
	}
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return "", false, false, fmt.Errorf("clean control plane dir: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, false, fmt.Errorf("create control plane dir: %w", err)
	}
	return dir, false, resumed, nil
}

// cpStart is one start of a control plane: its ports and files, and the clients its
// health checks use.
type cpStart struct {
	opts  ControlPlaneOptions
	cp    *ControlPlane
	files controlPlaneFiles
	logs  string

	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort int
	etcdURL                                                     string
	tlsClient                                                   *http.Client
}

func (st *cpStart) bin(name string) string { return filepath.Join(st.opts.BinDir, name) }

func (st *cpStart) closeClients() {
	if st.tlsClient != nil {
		st.tlsClient.CloseIdleConnections()
	}
}

// startEtcd starts etcd and waits for its health.
func (st *cpStart) startEtcd(ctx context.Context) error {
	st.opts.Logger.InfoContext(ctx, "starting etcd", slog.Int("port", st.etcdClient))
	st.etcdURL = "http://" + hostPort(st.etcdClient)
	peerURL := "http://" + hostPort(st.etcdPeer)
	etcd, err := startProcess("etcd", st.logs, st.bin("etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(st.cp.Dir, "etcd"),
		"--listen-client-urls="+st.etcdURL, "--advertise-client-urls="+st.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Only a persistent cluster's data outlives it: for a throwaway one durability
		// buys nothing, and fsync costs seconds.
		fmt.Sprintf("--unsafe-no-fsync=%t", !st.opts.Persistent),
		"--quota-backend-bytes=2147483648",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	st.cp.procs = append(st.cp.procs, etcd)
	plain := &http.Client{Timeout: 2 * time.Second}
	defer plain.CloseIdleConnections()
	return waitFor(ctx, "etcd health", 50*time.Millisecond, anyExited(etcd), httpOK(plain, st.etcdURL+"/health"))
}

// startAPIServer starts kube-apiserver, makes the admin client configuration and waits
// for readiness.
func (st *cpStart) startAPIServer(ctx context.Context) error {
	files, cp := st.files, st.cp
	st.opts.Logger.InfoContext(ctx, "starting kube-apiserver", slog.Int("port", st.apiPort))
	apiArgs := []string{
		"--etcd-servers=" + st.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", st.apiPort),
		"--tls-cert-file=" + files.apiserver.CertFile, "--tls-private-key-file=" + files.apiserver.KeyFile,
		"--client-ca-file=" + files.pki.CAFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + files.saPub, "--service-account-signing-key-file=" + files.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// Node: a real node's kubelet (system:node:NAME) may do what a kubelet needs
		// (RealNode); RBAC for everyone else.
		"--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate=" + files.apiserverKubelet.CertFile,
		"--kubelet-client-key=" + files.apiserverKubelet.KeyFile,
		"--kubelet-certificate-authority=" + files.pki.CAFile,
		"--kubelet-preferred-address-types=InternalIP",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
		"--v=0",
	}
	if st.opts.Throughput {
		// With priority and fairness off, 0 means no limit on requests in flight.
		apiArgs = append(apiArgs, "--max-requests-inflight=0", "--max-mutating-requests-inflight=0")
	}
	apiserver, err := startProcess("kube-apiserver", st.logs, st.bin("kube-apiserver"), apiArgs...)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, apiserver)
	cfg, err := kubeconfig.Load(cp.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("load admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	// Certificates in memory, not as file paths: with files client-go starts a
	// process-wide certificate-rotation watcher that never stops.
	if err := inlineCerts(cfg); err != nil {
		return err
	}
	cp.cfg = cfg
	if st.tlsClient, err = clientForCA(files.pki.CAFile, files.admin); err != nil {
		return err
	}
	if err := waitFor(ctx, "kube-apiserver readiness", 100*time.Millisecond, anyExited(cp.procs...), httpOK(st.tlsClient, cp.APIServerURL+"/readyz")); err != nil {
		return err
	}
	cp.tlsClient = st.tlsClient
	return nil
}

// rates are the controllers' client rate limit, and kwok's node lease duration with
// the grace the node lifecycle controller gives a node without a renewal (kwok renews
// every quarter of the duration).
func (st *cpStart) rates() (qps, burst string, leaseSeconds int, grace string) {
	if st.opts.Throughput {
		// A thousand simulated nodes renewing every 10 s are 100 writes a second,
		// simulator load; every 60 s is 17.
		return "5000", "10000", 240, "5m"
	}
	return "100", "200", 40, "50s"
}

// startControllers starts kube-controller-manager and kube-scheduler.
func (st *cpStart) startControllers(ctx context.Context) error {
	files, cp := st.files, st.cp
	qps, burst, _, grace := st.rates()
	st.opts.Logger.InfoContext(ctx, "starting kube-controller-manager, kube-scheduler and kwok")
	kcm, err := startProcess("kube-controller-manager", st.logs, st.bin("kube-controller-manager"),
		"--kubeconfig="+files.kcmKubeconfig,
		"--authentication-kubeconfig="+files.kcmKubeconfig, "--authorization-kubeconfig="+files.kcmKubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", st.kcmPort),
		"--leader-elect=false",
		"--service-account-private-key-file="+files.saKey,
		"--root-ca-file="+files.pki.CAFile,
		// Each controller acts as its own service account with its bootstrap RBAC role, as
		// kubeadm runs it; the controller manager's own identity may do little else.
		"--use-service-account-credentials=true",
		"--controllers=*",
		"--kube-api-qps="+qps, "--kube-api-burst="+burst,
		"--node-monitor-grace-period="+grace,
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, kcm)
	sched, err := startProcess("kube-scheduler", st.logs, st.bin("kube-scheduler"),
		"--kubeconfig="+files.schedKubeconfig,
		"--authentication-kubeconfig="+files.schedKubeconfig, "--authorization-kubeconfig="+files.schedKubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", st.schedPort),
		"--leader-elect=false",
		"--kube-api-qps="+qps, "--kube-api-burst="+burst,
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, sched)
	return nil
}

// startKwok starts the node server the API server reaches kwok through, then kwok.
func (st *cpStart) startKwok(ctx context.Context) error {
	files, cp := st.files, st.cp
	_, _, leaseSeconds, _ := st.rates()
	caPEM, err := os.ReadFile(files.pki.CAFile)
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	node, err := startNodeServer(ctx, nodeServerConfig{kwokAddr: hostPort(st.kwokPort), serving: files.kwokServing,
		client: files.apiserverKubelet, caPEM: caPEM, execDir: files.execDir, log: st.opts.Logger})
	if err != nil {
		return err
	}
	cp.node = node
	kwok, err := startKwok(st.logs, st.bin("kwok"), files, st.kwokPort, node.port(), leaseSeconds)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, kwok)
	return nil
}

// awaitHealthy waits for the scheduler, the controller manager, kwok and the node
// server to be healthy, and for the controllers to reconcile (the service-account
// controller creating "default").
func (st *cpStart) awaitHealthy(ctx context.Context) error {
	cp := st.cp
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		//nolint:gosec // loopback health probe of a component whose serving cert is self-signed at start
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer insecure.CloseIdleConnections()
	for _, c := range []struct {
		what   string
		client *http.Client
		url    string
	}{
		{"kube-scheduler health", insecure, "https://" + hostPort(st.schedPort) + "/healthz"},
		{"kube-controller-manager health", insecure, "https://" + hostPort(st.kcmPort) + "/healthz"},
		{"kwok health", st.tlsClient, "https://" + hostPort(st.kwokPort) + "/healthz"},
		// The API server reaches kwok through the node server.
		{"node server health", st.tlsClient, "https://" + cp.node.addr + "/healthz"},
	} {
		if err := waitFor(ctx, c.what, 100*time.Millisecond, anyExited(cp.procs...), httpOK(c.client, c.url)); err != nil {
			return err
		}
	}
	cs, err := kubernetes.NewForConfig(cp.cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return waitFor(ctx, "default service account", 100*time.Millisecond, anyExited(cp.procs...), func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// startKwok starts kwok serving on port; the nodes it simulates advertise nodePort,
// the node server's, as their kubelet endpoint.
func startKwok(logs, bin string, files controlPlaneFiles, port, nodePort, leaseSeconds int) (*process, error) {
	// kwok reads ~/.kwok/kwok.yaml in addition to --config; a private HOME keeps it hermetic.
	p, err := startProcess("kwok", logs, "/usr/bin/env", "HOME="+files.kwokHome, bin,
		"--config="+files.kwokConfig,
		"--kubeconfig="+files.kwokKubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"="+kwokNodeValue,
		"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", nodePort),
		"--server-address="+hostPort(port),
		"--tls-cert-file="+files.kwokServing.CertFile, "--tls-private-key-file="+files.kwokServing.KeyFile,
		"--cidr="+PodCIDR,
		fmt.Sprintf("--node-lease-duration-seconds=%d", leaseSeconds),
	)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// RESTConfig returns a copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.cfg) }

// RestartAPIServer stops kube-apiserver, keeps it down for down (an outage, for tests
// of what survives one), starts it again with the same flags and port, and returns once
// it is ready. Clients reconnect on their own.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	cp.mu.Lock()
	i := slices.IndexFunc(cp.procs, func(p *process) bool { return p.name == "kube-apiserver" })
	if i < 0 {
		cp.mu.Unlock()
		return errors.New("no kube-apiserver process")
	}
	old := cp.procs[i]
	cp.mu.Unlock()
	old.stop()
	t := time.NewTimer(down)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	cp.mu.Lock()
	select {
	case <-cp.stopping:
		cp.mu.Unlock()
		return errors.New("control plane stopped")
	default:
	}
	p, err := startProcess(old.name, old.logDir, old.bin, old.args...)
	if err != nil {
		cp.mu.Unlock()
		return err
	}
	cp.procs[i] = p
	cp.supervise(p)
	cp.mu.Unlock()
	return waitFor(ctx, "kube-apiserver readiness after restart", 100*time.Millisecond, cp.Err, httpOK(cp.tlsClient, cp.APIServerURL+"/readyz"))
}

// Stop ends the supervision and every process (in reverse start order) and removes
// the directory when it was a temporary one. It is idempotent.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		close(cp.stopping)
		// Real nodes first: their teardown needs their containerd and the API server.
		cp.mu.Lock()
		nodes := slices.Clone(cp.nodes)
		cp.mu.Unlock()
		for _, n := range nodes {
			n.Stop()
		}
		cp.mu.Lock()
		for i := len(cp.procs) - 1; i >= 0; i-- {
			cp.procs[i].stop()
		}
		cp.mu.Unlock()
		cp.wg.Wait()
		if cp.node != nil {
			cp.node.stop()
		}
		if cp.removed.Load() {
			if err := os.RemoveAll(cp.Dir); err != nil {
				cp.log.Warn("remove control plane dir", slog.String("dir", cp.Dir), slog.String("error", err.Error()))
			}
		}
	})
}

// KeepDir makes Stop leave the directory, with the processes' logs, in place: the
// evidence of a failed test run.
func (cp *ControlPlane) KeepDir() { cp.removed.Store(false) }

// Healthy reports why the control plane failed (Err), nil while it runs.
func (cp *ControlPlane) Healthy() error { return cp.Err() }

// httpOK is waitFor's check that GET url answers 200.
func httpOK(c *http.Client, url string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		resp, err := getOK(ctx, c, url)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return true, nil
	}
}

// getOK GETs url with c: the response of a 200, whose body the caller closes, or why
// there is none.
func getOK(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

func clientForCA(caFile string, client certPair) (*http.Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load client cert: %w", err)
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// controlPlaneFiles are the generated credentials and configuration of one control plane.
type controlPlaneFiles struct {
	pki                                                             *pki
	apiserver, apiserverKubelet, admin, kwokServing                 certPair
	saKey, saPub                                                    string
	adminKubeconfig, kcmKubeconfig, schedKubeconfig, kwokKubeconfig string
	kwokHome, kwokConfig, containerLog, execDir                     string
}

func writeControlPlaneFiles(dir, binDir, serverURL string, throughput, persistent bool) (controlPlaneFiles, error) {
	var f controlPlaneFiles
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return f, fmt.Errorf("create pki dir: %w", err)
	}
	p, err := newPKI(pkiDir)
	if err != nil {
		return f, err
	}
	f.pki = p
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if f.apiserver, err = p.serving("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append(loopback, net.IPv4(10, 96, 0, 1))); err != nil {
		return f, err
	}
	if f.kwokServing, err = p.serving("kwok-kubelet", []string{"localhost"}, loopback); err != nil {
		return f, err
	}
	if f.apiserverKubelet, err = p.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"); err != nil {
		return f, err
	}
	if f.admin, err = p.client("admin", "berth-admin", "system:masters"); err != nil {
		return f, err
	}
	kcm, err := p.client("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return f, err
	}
	sched, err := p.client("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return f, err
	}
	kwok, err := p.client("kwok", "kwok-controller", "system:masters")
	if err != nil {
		return f, err
	}
	if f.saKey, f.saPub, err = serviceAccountKeys(pkiDir, persistent); err != nil {
		return f, err
	}
	writeKubeconfig := func(name string, c certPair) (string, error) {
		path := filepath.Join(dir, name+".kubeconfig")
		return path, writeKubeconfig(path, serverURL, p.CAFile, c)
	}
	if f.adminKubeconfig, err = writeKubeconfig("admin", f.admin); err != nil {
		return f, err
	}
	if f.kcmKubeconfig, err = writeKubeconfig("kube-controller-manager", kcm); err != nil {
		return f, err
	}
	if f.schedKubeconfig, err = writeKubeconfig("kube-scheduler", sched); err != nil {
		return f, err
	}
	if f.kwokKubeconfig, err = writeKubeconfig("kwok", kwok); err != nil {
		return f, err
	}
	f.kwokHome = filepath.Join(dir, "kwok")
	f.execDir = filepath.Join(f.kwokHome, "exec")
	if err := os.MkdirAll(f.execDir, 0o700); err != nil {
		return f, fmt.Errorf("create kwok dir: %w", err)
	}
	f.containerLog = filepath.Join(f.kwokHome, "containers.log")
	if err := os.WriteFile(f.containerLog, nil, 0o600); err != nil {
		return f, fmt.Errorf("create container log: %w", err)
	}
	f.kwokConfig = filepath.Join(f.kwokHome, "config.yaml")
	return f, writeKwokConfig(f.kwokConfig, filepath.Join(binDir, "kwok-stages"), f.containerLog, throughput)
}

func writeKubeconfig(path, server, caFile string, c certPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["berth"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["berth"] = &clientcmdapi.AuthInfo{ClientCertificate: c.CertFile, ClientKey: c.KeyFile}
	cfg.Contexts["berth"] = &clientcmdapi.Context{Cluster: "berth", AuthInfo: "berth"}
	cfg.CurrentContext = "berth"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// inlineCerts reads a config's certificate and key files into its data fields.
func inlineCerts(cfg *rest.Config) error {
	for _, f := range []struct {
		path *string
		data *[]byte
	}{{&cfg.CertFile, &cfg.CertData}, {&cfg.KeyFile, &cfg.KeyData}, {&cfg.CAFile, &cfg.CAData}} {
		if *f.path == "" {
			continue
		}
		b, err := os.ReadFile(*f.path)
		if err != nil {
			return fmt.Errorf("admin kubeconfig: %w", err)
		}
		*f.data, *f.path = b, ""
	}
	return nil
}

// CPUTimes returns the CPU time (user and system) each running control-plane process
// has used so far, by name ("etcd", "kube-apiserver", ...). A process whose /proc
// entry cannot be read is left out.
func (cp *ControlPlane) CPUTimes() map[string]time.Duration {
	cp.mu.Lock()
	procs := slices.Clone(cp.procs)
	cp.mu.Unlock()
	out := make(map[string]time.Duration, len(procs))
	for _, p := range procs {
		if t, ok := procCPUTime(p.cmd.Process.Pid); ok {
			out[p.name] = t
		}
	}
	return out
}

// procCPUTime reads utime and stime from /proc/<pid>/stat, in USER_HZ ticks (100 a
// second on Linux).
func procCPUTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// WriteFlatKubeconfig writes the kubeconfig at src to dst with its certificates inline,
// readable only by the user. Clients of a kubeconfig naming certificate files start a
// process-wide certificate rotation watcher; an inline one does not.
func WriteFlatKubeconfig(src, dst string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", src, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", src, err)
	}
	if err := clientcmd.WriteToFile(*cfg, dst); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", dst, err)
	}
	return os.Chmod(dst, 0o600)
}
