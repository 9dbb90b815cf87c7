package localenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/bits"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/wait"
)

// This file: a real node beside kwok's simulated ones. containerd (with runc and
// Debian's CNI plugins), a kubelet and kube-proxy run on this machine, as root, and
// register a node that really runs containers: their logs are their output, exec runs
// in their namespaces, and their ports answer on their pod addresses.

// CNIBinDir is where Debian's containernetworking-plugins installs the CNI plugins.
const CNIBinDir = "/usr/lib/cni"

// PauseImageRef is the pod sandbox image a real node's containerd is given: the
// project's own (PauseImage), imported at start, so that nothing is pulled.
const PauseImageRef = "berth.local/pause:1"

// Defaults of RealNodeOptions.
const (
	DefaultRealNodeName = "real-0"
	// DefaultRealPodCIDR is where a real node's pods get their addresses. It must be a
	// range this machine does not use (StartRealNode checks): these machines' own
	// interface is on 192.0.2.0/24, and kwok's fake pods draw from PodCIDR.
	DefaultRealPodCIDR = "10.88.0.0/16"
	DefaultRealBridge  = "berth0"
)

// RealNodeOptions configures StartRealNode.
type RealNodeOptions struct {
	// Name is the node's name (default DefaultRealNodeName).
	Name string
	// PodCIDR is the pods' address range (default DefaultRealPodCIDR); Bridge the
	// node's bridge, at most 15 characters (default DefaultRealBridge).
	PodCIDR, Bridge string
	// ImagesDir is hack/images.sh's directory; empty: FindImages.
	ImagesDir string
	// NetPolDir is hack/netpol.sh's directory (kube-router, which enforces the
	// cluster's NetworkPolicies on the node); empty: FindNetworkPolicy.
	NetPolDir string
	// DNSDir is hack/dns.sh's directory (CoreDNS, the cluster's DNS, run as a pod of
	// the node); empty: FindDNS.
	DNSDir string
	// Images are imported into the node's containerd at start, besides the pause image.
	Images []Image
	// Labels are added to the node's own.
	Labels map[string]string
	// StartTimeout bounds the start (default 2 minutes).
	StartTimeout time.Duration
}

func (o *RealNodeOptions) defaults() {
	if o.Name == "" {
		o.Name = DefaultRealNodeName
	}
	if o.PodCIDR == "" {
		o.PodCIDR = DefaultRealPodCIDR
	}
	if o.Bridge == "" {
		o.Bridge = DefaultRealBridge
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
}

// RealNode is a running real node of a ControlPlane. Its processes are the control
// plane's: supervised and restarted as its RestartPolicy says, stopped by its Stop.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// Dir holds the node's state: containerd's, the kubelet's, the CNI's, and logs.
	Dir string
	// PodCIDR is where its pods get their addresses.
	PodCIDR string
	// ContainerdSocket is containerd's socket (`ctr --address`).
	ContainerdSocket string

	cp      *ControlPlane
	opts    RealNodeOptions
	gateway netip.Addr // the bridge's address: the pods' gateway
	files   realNodeFiles
	procs   []*process // as started; a restarted one is the control plane's
	host    *hostNetwork
	unlock  func()
	log     *slog.Logger

	teardownOnce, stopOnce sync.Once
}

// StartRealNode starts containerd, a kubelet and kube-proxy on this machine as a node
// of cp, imports the pause image and opts.Images, and returns once the node is Ready.
// It needs root, containerd, runc, the CNI plugins and iptables (Debian's containerd,
// runc, containernetworking-plugins and iptables packages), and the kubelet and
// kube-proxy built by hack/testbin.sh; what is missing is an ErrMissingDependency.
//
// One real node runs on a machine at a time: kube-proxy's rules and the forwarding
// sysctl are the machine's. A second start waits for the first node's Stop (or ctx).
// The control plane's Stop stops the node too.
func (cp *ControlPlane) StartRealNode(ctx context.Context, opts RealNodeOptions) (_ *RealNode, retErr error) {
	opts.defaults()
	if err := CheckRealNodeHost(cp.binDir); err != nil {
		return nil, err
	}
	if len(opts.Bridge) > 15 {
		return nil, fmt.Errorf("real node: bridge name %q is longer than 15 characters", opts.Bridge)
	}
	podNet, err := netip.ParsePrefix(opts.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("real node: pod CIDR %q: %w", opts.PodCIDR, err)
	}
	if opts.ImagesDir == "" {
		if opts.ImagesDir, err = FindImages(ctx); err != nil {
			return nil, err
		}
	}
	if opts.NetPolDir == "" {
		if opts.NetPolDir, err = FindNetworkPolicy(ctx); err != nil {
			return nil, err
		}
	}
	if opts.DNSDir == "" {
		if opts.DNSDir, err = FindDNS(ctx); err != nil {
			return nil, err
		}
	}
	// The wait for another node is not start-up time: it has the caller's bound only.
	unlock, err := lockRealNode(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	n := &RealNode{Name: opts.Name, Dir: filepath.Join(cp.Dir, "node-"+opts.Name), PodCIDR: opts.PodCIDR,
		cp: cp, opts: opts, unlock: unlock, log: cp.log.With(slog.String("node", opts.Name))}
	n.files = newRealNodeFiles(n.Dir)
	n.ContainerdSocket = n.files.socket
	defer func() {
		if retErr != nil {
			n.Stop()
		}
	}()
	if !cp.addNode(n) {
		return nil, errors.New("real node: the control plane is stopped")
	}
	// A node of an earlier run that ended without its Stop (killed) may have left its
	// bridge (and, in its control plane's directory, which a new start empties, its
	// shims, containers and mounts: abandonedNodes); the lock says no node runs now.
	deleteLink(ctx, opts.Bridge)
	if err := CheckRangeUnused(podNet, opts.Bridge); err != nil {
		return nil, fmt.Errorf("real node: pod CIDR: %w", err)
	}
	ports, err := FreePorts(ctx, 4)
	if err != nil {
		return nil, err
	}
	np := realNodePorts{kubelet: ports[0], kubeletHealth: ports[1], proxyHealth: ports[2], proxyMetrics: ports[3]}
	if err := n.files.write(cp, opts, np); err != nil {
		return nil, err
	}
	if n.host, err = setUpHostNetwork(ctx, opts.PodCIDR, opts.Bridge); err != nil {
		return nil, err
	}
	// kube-router's rules of a node that ended without its teardown (killed).
	removeNetworkPolicy(ctx)
	n.gateway = podNet.Masked().Addr().Next()
	// In-cluster clients reach the API server at the kubernetes Service, which has no
	// endpoints here: the API server advertises 127.0.0.1, which no Endpoints may hold.
	if err := n.host.exposeToPods(ctx, netip.AddrPortFrom(kubernetesServiceIP(), 443), cp.apiPort()); err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{
		n.startContainerd,
		func(ctx context.Context) error {
			return n.ImportImages(ctx, append([]Image{PauseImage(PauseImageRef, opts.ImagesDir)}, opts.Images...)...)
		},
		func(ctx context.Context) error { return n.startKubelet(ctx, np) },
		func(ctx context.Context) error { return n.startKubeProxy(ctx, np) },
		n.startNetworkPolicy,
		n.startClusterDNS,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	cp.superviseAll("containerd", "kubelet", "kube-proxy", "kube-router")
	n.log.InfoContext(ctx, "real node ready", slog.String("dir", n.Dir), slog.String("pod_cidr", n.PodCIDR))
	return n, nil
}

// ExposeToPods lets the node's pods reach this machine's server on 127.0.0.1:port at
// the address it returns: the bridge's (the pods' gateway), same port. Only the pods'
// TCP connections to that address and port are rewritten to loopback (as they are to
// the API server's, from the kubernetes Service's address); the server still listens
// on loopback only. Stop removes the rule.
func (n *RealNode) ExposeToPods(ctx context.Context, port int) (netip.AddrPort, error) {
	if port <= 0 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("real node: expose port %d to pods: not a port", port)
	}
	at := netip.AddrPortFrom(n.gateway, uint16(port))
	if err := n.host.exposeToPods(ctx, at, port); err != nil {
		return netip.AddrPort{}, err
	}
	return at, nil
}

// kubernetesServiceIP is the kubernetes Service's cluster IP: ServiceCIDR's first
// address.
func kubernetesServiceIP() netip.Addr {
	return netip.MustParsePrefix(ServiceCIDR).Masked().Addr().Next()
}

// CheckRealNodeHost reports, as an ErrMissingDependency, what a real node needs and
// this machine lacks (binDir: the kubelet's and kube-proxy's).
func CheckRealNodeHost(binDir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: a real node runs containerd and a kubelet, which need root", ErrMissingDependency)
	}
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "ipset"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(CNIBinDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: a real node needs %s (apt-get install containerd runc containernetworking-plugins iptables iproute2 ipset; make deps does)",
			ErrMissingDependency, strings.Join(missing, ", "))
	}
	for _, b := range []string{"kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%w: %s not found in %s; run `make testbin` or hack/testbin.sh", ErrMissingDependency, b, binDir)
		}
	}
	return nil
}

// realNodeLock is the machine-wide lock a running real node holds.
const realNodeLock = "/run/berth-real-node.lock"

// lockRealNode takes realNodeLock, waiting while another real node holds it. The lock
// is a flock: a process that dies releases it.
func lockRealNode(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(realNodeLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("real node lock: %w", err)
	}
	err = wait.Until(ctx, 200*time.Millisecond, func(context.Context) error {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
			return wait.Abort(fmt.Errorf("real node lock %s: %w", realNodeLock, err))
		}
		return err
	})
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("waiting for another real node on this machine to stop (%s): %w", realNodeLock, err)
		}
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// CheckRangeUnused refuses a range that overlaps an address or a route of this machine
// (but for those of the interface named ignore, if any).
func CheckRangeUnused(r netip.Prefix, ignore string) error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Name == ignore {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Overlaps(r) {
				return fmt.Errorf("%s overlaps %s on %s, an address this machine uses; choose another range", r, p, ifc.Name)
			}
		}
	}
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return fmt.Errorf("read routes: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(routes))
	for sc.Scan() {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask …, addresses in hex,
		// in the kernel's (little-endian) byte order.
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] == "Iface" || f[0] == ignore {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue // the default route overlaps everything; it is not a use of the range
		}
		var d [4]byte
		binary.LittleEndian.PutUint32(d[:], uint32(dst))
		rn := netip.PrefixFrom(netip.AddrFrom4(d), bits.OnesCount32(uint32(mask)))
		if rn.Overlaps(r) {
			return fmt.Errorf("%s overlaps the route to %s via %s; choose another range", r, rn, f[0])
		}
	}
	return nil
}

// adopt makes p, just started, one of the control plane's processes (supervised once
// the node is ready).
func (n *RealNode) adopt(p *process) {
	n.procs = append(n.procs, p)
	n.cp.adopt(p, false)
}

// startContainerd starts containerd and waits for its CRI to answer.
func (n *RealNode) startContainerd(ctx context.Context) error {
	n.log.InfoContext(ctx, "starting containerd")
	p, err := startProcess("containerd", n.files.logs, "containerd", "--config", n.files.containerdConfig, "--log-level", "warn")
	if err != nil {
		return err
	}
	n.adopt(p)
	cri, err := dialCRI(n.files.socket)
	if err != nil {
		return err
	}
	defer cri.close()
	return waitFor(ctx, "containerd's CRI", 100*time.Millisecond, anyExited(p), func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(n.files.socket); err != nil {
			return false, nil
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cri.sandboxes(ctx)
		return err == nil, err
	})
}

// ImportImages imports images into the node's containerd, where the kubelet finds
// them (a pod's image pull policy must not be Always: nothing is pulled).
func (n *RealNode) ImportImages(ctx context.Context, images ...Image) error {
	for i := range images {
		img := &images[i]
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(img.WriteDockerArchive(pw)) }()
		var out bytes.Buffer
		//nolint:gosec // G204: ctr with this node's own socket and a fixed subcommand
		cmd := exec.CommandContext(ctx, "ctr", "--address", n.files.socket, "--namespace", "k8s.io", "images", "import", "--no-unpack=false", "-")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &out, &out
		err := cmd.Run()
		_ = pr.Close()
		if err != nil {
			return fmt.Errorf("import image %s into the real node: %w: %s", img.Ref, err, strings.TrimSpace(out.String()))
		}
	}
	return nil
}

// TrustRegistry lets the node pull from the plain-HTTP registry at addr (host:port, a
// Registry's Addr); containerd reads it at the next pull.
func (n *RealNode) TrustRegistry(addr string) error {
	return TrustRegistryAt(n.Dir, addr)
}

// TrustRegistryAt is TrustRegistry for the real node whose directory is nodeDir (a
// RealNode's Dir: CONTROL_PLANE_DIR/node-NAME), such as berth dev's from a test. The
// node's containerd reads the file at each pull.
func TrustRegistryAt(nodeDir, addr string) error {
	dir := filepath.Join(newRealNodeFiles(nodeDir).registries, addr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("trust registry %s: %w", addr, err)
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+addr)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600); err != nil {
		return fmt.Errorf("trust registry %s: %w", addr, err)
	}
	return nil
}

// startKubelet starts the kubelet and waits for its node to be Ready.
func (n *RealNode) startKubelet(ctx context.Context, ports realNodePorts) error {
	n.log.InfoContext(ctx, "starting the kubelet", slog.Int("port", ports.kubelet))
	labels := make([]string, 0, len(n.opts.Labels))
	for k, v := range n.opts.Labels {
		labels = append(labels, k+"="+v)
	}
	slices.Sort(labels)
	args := []string{
		"--config=" + n.files.kubeletConfig,
		"--kubeconfig=" + n.files.kubeletKubeconfig,
		"--hostname-override=" + n.Name,
		"--node-ip=127.0.0.1",
		"--root-dir=" + n.files.kubeletRoot,
		"--cert-dir=" + filepath.Join(n.Dir, "pki"),
		"--v=1",
	}
	if len(labels) > 0 {
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	p, err := startProcess("kubelet", n.files.logs, filepath.Join(n.cp.binDir, "kubelet"), args...)
	if err != nil {
		return err
	}
	n.adopt(p)
	cs, err := kubernetes.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return waitFor(ctx, "node "+n.Name+" Ready", 200*time.Millisecond, anyExited(n.procs...), func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if err := n.setAddress(ctx, cs, node); err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("node %s not ready: %s", n.Name, c.Message)
			}
		}
		return false, nil
	})
}

// setAddress gives the node 127.0.0.1 as its InternalIP, where the API server reaches
// the kubelet for logs and exec. The kubelet refuses to report a loopback address
// itself (--node-ip 127.0.0.1 fails its validation) and then leaves the addresses it
// finds on the Node as they are.
func (n *RealNode) setAddress(ctx context.Context, cs kubernetes.Interface, node *corev1.Node) error {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == "127.0.0.1" {
			return nil
		}
	}
	patch := fmt.Sprintf(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"},{"type":"Hostname","address":%q}]}}`, n.Name)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("set node %s's address: %w", n.Name, err)
	}
	return nil
}

// startKubeProxy starts kube-proxy and waits for its health.
func (n *RealNode) startKubeProxy(ctx context.Context, ports realNodePorts) error {
	n.log.InfoContext(ctx, "starting kube-proxy")
	p, err := startProcess("kube-proxy", n.files.logs, filepath.Join(n.cp.binDir, "kube-proxy"), "--config="+n.files.proxyConfig, "--v=1")
	if err != nil {
		return err
	}
	n.adopt(p)
	plain := &http.Client{Timeout: 2 * time.Second}
	defer plain.CloseIdleConnections()
	return waitFor(ctx, "kube-proxy health", 100*time.Millisecond, anyExited(n.procs...), httpOK(plain, "http://"+hostPort(ports.proxyHealth)+"/healthz"))
}

// Stop stops kube-proxy and the kubelet, removes every pod sandbox (its containers,
// network namespace, address and port mappings), stops containerd and the shims it
// left, unmounts what remains under the node's directory, removes the node's iptables
// rules, bridge and container log links, restores the sysctls it changed (ip_forward,
// bridge-nf-call-iptables, route_localnet), deletes the Node, and releases the
// machine's real-node lock. It is idempotent.
func (n *RealNode) Stop() {
	n.stopOnce.Do(func() {
		n.teardown()
		if n.unlock != nil {
			n.unlock()
		}
	})
}

// teardown is Stop but for the release of the machine's lock: what it left can be
// checked before another node may start (the tests do).
func (n *RealNode) teardown() {
	n.teardownOnce.Do(func() {
		//nolint:forbidigo // Stop has no caller context (ControlPlane.Stop, deferred cleanups); the teardown is bounded here
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n.cp.removeNode(n)
		if n.cp.stopNamed("kube-router") {
			removeNetworkPolicy(ctx)
		}
		n.cp.stopNamed("kubelet")
		if n.cp.stopNamed("kube-proxy") {
			n.runQuiet(ctx, filepath.Join(n.cp.binDir, "kube-proxy"), "--cleanup", "--config="+n.files.proxyConfig)
		}
		if slices.ContainsFunc(n.procs, func(p *process) bool { return p.name == "containerd" }) {
			n.removeSandboxes(ctx)
			n.cp.stopNamed("containerd")
		}
		killShims(func(socket string) bool { return socket == n.files.socket })
		unmountUnder(n.Dir)
		removeLogLinks(n.files.podLogs)
		if n.host != nil {
			n.host.restore(ctx)
		}
		deleteLink(ctx, n.opts.Bridge)
		if cs, err := kubernetes.NewForConfig(n.cp.RESTConfig()); err == nil {
			if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && n.cp.Err() == nil {
				n.log.Warn("delete the real node's Node", slog.String("error", err.Error()))
			}
		}
		if left := mountsUnder(n.Dir); len(left) > 0 { // never remove through a mount
			n.log.Warn("the real node's directory is kept: mounts under it would not unmount", slog.String("dir", n.Dir), slog.Any("mounts", left))
		} else if err := os.RemoveAll(n.Dir); err != nil {
			n.log.Warn("remove the real node's directory", slog.String("dir", n.Dir), slog.String("error", err.Error()))
		}
	})
}

// removeSandboxes removes every pod sandbox through containerd's CRI.
func (n *RealNode) removeSandboxes(ctx context.Context) {
	cri, err := dialCRI(n.files.socket)
	if err != nil {
		n.log.WarnContext(ctx, "real node teardown", slog.String("error", err.Error()))
		return
	}
	defer cri.close()
	ids, err := cri.sandboxes(ctx)
	if err != nil {
		n.log.WarnContext(ctx, "real node teardown: list pod sandboxes", slog.String("error", err.Error()))
		return
	}
	for _, id := range ids {
		if err := cri.removeSandbox(ctx, id); err != nil {
			n.log.WarnContext(ctx, "real node teardown: remove pod sandbox", slog.String("sandbox", id), slog.String("error", err.Error()))
		}
	}
}

func (n *RealNode) runQuiet(ctx context.Context, bin string, args ...string) {
	//nolint:gosec // G204: the node's own binaries with arguments built here
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		n.log.WarnContext(ctx, "real node teardown", slog.String("command", filepath.Base(bin)+" "+strings.Join(args, " ")),
			slog.String("error", err.Error()), slog.String("output", strings.TrimSpace(string(out))))
	}
}

// killShims kills the containerd shims serving a containerd whose socket serving says
// is the node's (they outlive containerd by design) and the containers they still
// run: each container's first process, the shim's child, whose death ends the
// container's PID namespace and so every process in it.
func killShims(serving func(socket string) bool) {
	var shims []int
	for pid, args := range Processes() {
		i := slices.Index(args, "-address")
		if strings.Contains(filepath.Base(args[0]), "containerd-shim") && i >= 0 && i+1 < len(args) && serving(args[i+1]) {
			shims = append(shims, pid)
		}
	}
	if len(shims) == 0 {
		return
	}
	for pid := range Processes() {
		if slices.Contains(shims, parentOf(pid)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range shims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// abandonedNodes ends what real nodes of a killed run left under dir, a control plane
// directory about to be emptied: their shims and containers, and their mounts (a
// pod's volume may be bind-mounted there). It fails if a mount stays: the directory
// must not be removed through it.
func abandonedNodes(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	killShims(func(socket string) bool { return strings.HasPrefix(socket, dir+"/") })
	unmountUnder(dir)
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("an earlier run left mounts under %s that would not unmount: %s", dir, strings.Join(left, ", "))
	}
	return nil
}

// parentOf is a process's parent's ID (0 when it cannot be read).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the
	// last ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// Processes yields this machine's processes: their IDs and command lines (argv).
func Processes() iter.Seq2[int, []string] {
	return func(yield func(int, []string) bool) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || len(cmdline) == 0 {
				continue
			}
			if !yield(pid, strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")) {
				return
			}
		}
	}
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) {
	for _, p := range mountsUnder(dir) {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var points []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	return points
}

// removeLogLinks removes the links the kubelet made in /var/log/containers to logs
// under podLogs.
func removeLogLinks(podLogs string) {
	const dir = "/var/log/containers"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, podLogs+"/") {
			_ = os.Remove(path)
		}
	}
}

func deleteLink(ctx context.Context, name string) {
	if _, err := net.InterfaceByName(name); err != nil {
		return
	}
	_ = exec.CommandContext(ctx, "ip", "link", "delete", name).Run() //nolint:gosec // G204: the node's own bridge
}

// apiPort is the API server's loopback port.
func (cp *ControlPlane) apiPort() int {
	u, err := url.Parse(cp.APIServerURL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}
