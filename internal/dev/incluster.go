package dev

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/chartspec"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
	"berth.dev/berth/internal/wait"
	"berth.dev/berth/internal/yaml"
)

// This file: berth dev --chart, the provider and its operators installed with the Helm
// chart as pods on the real node, the way a provider runs them in its cluster.

// Where --chart installs the chart.
const (
	ChartRelease   = "berth"
	ChartNamespace = "berth-system"
)

// chartKeySecret is the Secret of the provider's key that berth dev makes from the
// home's keyring (provider.key.existingSecret).
const chartKeySecret = "berth-dev-provider-key" //nolint:gosec // G101: a Secret's name, not a credential

// inClusterTimeout bounds the install: the image pulled, the pods started, the
// provider bidding.
const inClusterTimeout = 4 * time.Minute

// devInCluster is what --chart installed.
type devInCluster struct {
	helm, chart, dir string // helm binary, the chart, berth dev's files (values, helm's own)
	image            string // berth's image, in the dev registry
	ledger           string // the ledger node's RPC as the pods reach it
	kubeconfig       string
	cs               kubernetes.Interface
}

// startInCluster makes berth's image from this (static) binary and pushes it to the dev
// registry, lets the pods reach the ledger node, registers the provider with its
// gateway at a node port on 127.0.0.1, installs the chart (the provider's key as a
// Secret, the settings berth dev gives its own provider) and waits until the provider
// bids. Stop uninstalls the release.
func (r *devRun) startInCluster(pc config.ProviderConfig, banner *devBanner) (*chain.Client, error) {
	ctx := r.ctx
	exe, err := devExecutable(r.cfg, "--chart")
	if err != nil {
		return nil, err
	}
	if err := localenv.CheckStatic(exe); err != nil {
		return nil, fmt.Errorf("--chart: berth's image: %w (make build does)", err)
	}
	cs, err := kubeClient(r.kubeconfig)
	if err != nil {
		return nil, err
	}
	ic := &devInCluster{helm: r.helm, chart: r.cfg.Chart, dir: filepath.Join(r.cp.Dir, "chart"), kubeconfig: r.kubeconfig, cs: cs}
	if err := os.MkdirAll(ic.dir, 0o700); err != nil {
		return nil, fmt.Errorf("--chart: %w", err)
	}
	if ic.image, err = pushBerthImage(ctx, r.registry.Addr, exe); err != nil {
		return nil, err
	}
	rpc, err := url.Parse(r.rpc)
	if err != nil {
		return nil, fmt.Errorf("ledger node RPC %q: %w", r.rpc, err)
	}
	rpcPort, _ := strconv.Atoi(rpc.Port())
	at, err := r.realNode.ExposeToPods(ctx, rpcPort)
	if err != nil {
		return nil, err
	}
	ic.ledger = "tcp://" + at.String()

	// Registered before the provider starts (it signs with the same key): its gateway at
	// node ports chosen now.
	ports, err := freeNodePorts(ctx, 2)
	if err != nil {
		return nil, err
	}
	client, bcast, err := devBroadcaster(ctx, r.rpc, pc)
	if err != nil {
		if client != nil {
			client.Close()
		}
		return nil, err
	}
	r.onStop(func() error { client.Close(); return nil })
	hostURI := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	attrs, err := pc.Registered()
	if err != nil {
		return nil, err
	}
	if err := registerDevProvider(ctx, client, bcast, hostURI, attrs); err != nil {
		return nil, err
	}
	if err := ic.createKeySecret(ctx, pc); err != nil {
		return nil, err
	}
	values, err := ic.values(pc, bcast.Address(), r.node.ChainID(), hostURI, ports)
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "installing the chart", slog.String("chart", ic.chart), slog.String("image", ic.image), slog.String("namespace", ChartNamespace))
	if err := ic.run(ctx, "upgrade", "--install", ChartRelease, ic.chart, "--namespace", ChartNamespace, "--values", values); err != nil {
		return nil, err
	}
	r.onStop(func() error { return ic.uninstall(context.WithoutCancel(ctx)) })
	if err := ic.awaitBidding(ctx, hostURI); err != nil {
		return nil, err
	}
	banner.provider, banner.providerAddr = hostURI, bcast.Address()
	banner.grpc = "127.0.0.1:" + strconv.Itoa(ports[1])
	banner.manifestTimeout = pc.Gateway.ManifestTimeout
	banner.inCluster = ic
	return client, nil
}

// pushBerthImage pushes an image of the berth binary exe to the registry at addr,
// tagged with the start of the binary's SHA-256, and returns its reference.
func pushBerthImage(ctx context.Context, addr, exe string) (string, error) {
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("--chart: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	_ = f.Close()
	if err != nil {
		return "", fmt.Errorf("--chart: read %s: %w", exe, err)
	}
	tag := hex.EncodeToString(h.Sum(nil))[:12]
	ref := addr + "/berth:" + tag
	if _, err := localenv.Push(ctx, addr, "berth", tag, "", "", localenv.BerthImage(ref, exe)); err != nil {
		return "", fmt.Errorf("--chart: push berth's image: %w", err)
	}
	return ref, nil
}

// freeNodePorts picks n ports of the API server's default node-port range
// (30000–32767) that nothing on this machine listens on.
func freeNodePorts(ctx context.Context, n int) ([]int, error) {
	var lc net.ListenConfig
	var ports []int
	for range 200 {
		p := 30000 + rand.IntN(2768) //nolint:gosec // G404: a port to try, not a secret
		if slices.Contains(ports, p) {
			continue
		}
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		if ports = append(ports, p); len(ports) == n {
			return ports, nil
		}
	}
	return nil, errors.New("--chart: no free port in the node-port range 30000-32767 on 127.0.0.1")
}

// createKeySecret makes the release's namespace and the Secret of the provider's key
// file (the chart copies it into the provider's home).
func (ic *devInCluster) createKeySecret(ctx context.Context, pc config.ProviderConfig) error {
	keyFile := pc.From + ".json"
	key, err := os.ReadFile(filepath.Join(node.KeyringDir(pc.Home), keyFile))
	if err != nil {
		return fmt.Errorf("--chart: the provider's key: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ChartNamespace}}
	if _, err := ic.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--chart: namespace %s: %w", ChartNamespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: chartKeySecret, Namespace: ChartNamespace},
		Data:       map[string][]byte{keyFile: key},
	}
	if _, err := ic.cs.CoreV1().Secrets(ChartNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("--chart: the provider key's Secret: %w", err)
	}
	return nil
}

// values writes the chart's values: berth's image; the settings berth dev gives its
// own provider and operators, but for what the pods see differently (the ledger at
// the address the pods reach, the cluster in-cluster, the home and listen addresses
// the chart's); the gateway at the node ports registered; the volume from the dev
// provisioner; one replica each and small requests, for a machine of two cores.
func (ic *devInCluster) values(pc config.ProviderConfig, provider, chainID, hostURI string, nodePorts []int) (string, error) {
	defaults := chartspec.Defaults()
	def, ok1 := defaults["provider"].(config.ProviderConfig)
	hdef, ok2 := defaults["hostname"].(hostname.Config)
	idef, ok3 := defaults["ip"].(ip.Config)
	vdef, ok4 := defaults["inventory"].(inventoryop.Config)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", errors.New("--chart: the chart's defaults are not the processes' settings")
	}
	pc.Home, pc.Node, pc.Kubeconfig, pc.HostURI, pc.LogLevel = chartspec.Home, ic.ledger, "", hostURI, "info"
	pc.Gateway.Listen, pc.Gateway.GRPCListen = def.Gateway.Listen, def.Gateway.GRPCListen
	pc.Bus.Redis, pc.Inventory.Operator = "", ""
	hc := devHostnameConfig(pc, provider, chainID, "")
	hc.Listen, hc.LeaderElection.Namespace = hdef.Listen, ""
	ipc := devIPConfig(provider, chainID, "", idef.Listen)
	vc := devInventoryConfig("", vdef.Listen)
	settings := map[string]any{"provider": pc, "hostname": hc, "ip": ipc, "inventory": vc}
	i := strings.LastIndex(ic.image, ":")
	repo, tag := ic.image[:i], ic.image[i+1:]
	small := map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "1Gi"}}
	operator := func(name string) map[string]any {
		return map[string]any{"enabled": true, "replicas": 1, "resources": small, "settings": settings[name]}
	}
	v := map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
		"owner": map[string]any{"address": provider, "chainID": chainID},
		"provider": map[string]any{
			"key":          map[string]any{"existingSecret": chartKeySecret},
			"settings":     settings["provider"],
			"keyringImage": BusyboxImageRef,
			"resources":    small,
			"persistence":  map[string]any{"size": "64Mi", "storageClass": localenv.DevStorageClasses[0]},
			"service":      map[string]any{"type": "NodePort", "nodePorts": map[string]any{"gateway": nodePorts[0], "grpc": nodePorts[1]}},
		},
		"operators": map[string]any{"hostname": operator("hostname"), "ip": operator("ip"), "inventory": operator("inventory")},
		"redis":     map[string]any{"enabled": false},
	}
	b, err := yaml.Encode(v)
	if err != nil {
		return "", err
	}
	path := filepath.Join(ic.dir, "values.yaml")
	if err := os.WriteFile(path, append([]byte("# written by berth dev --chart at each start\n"), b...), 0o600); err != nil {
		return "", fmt.Errorf("--chart: %w", err)
	}
	return path, nil
}

// run runs helm with args on the dev cluster, its own files under the chart directory.
func (ic *devInCluster) run(ctx context.Context, args ...string) error {
	//nolint:gosec // G204: the helm binary berth dev found, with arguments built here
	cmd := exec.CommandContext(ctx, ic.helm, append(args, "--kubeconfig", ic.kubeconfig)...)
	helmDir := filepath.Join(ic.dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(helmDir, "config"),
		"HELM_CACHE_HOME="+filepath.Join(helmDir, "cache"), "HELM_DATA_HOME="+filepath.Join(helmDir, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("--chart: helm %s: %w\n%s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// uninstall removes the release and the provider's home volume (the chart keeps it),
// so that the next start installs the chart afresh. ctx is the run's, without its cancellation (it
// runs at stop), bounded here.
func (ic *devInCluster) uninstall(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ic.run(ctx, "uninstall", ChartRelease, "--namespace", ChartNamespace, "--wait", "--timeout", "50s"); err != nil {
		return err
	}
	err := ic.cs.CoreV1().PersistentVolumeClaims(ChartNamespace).Delete(ctx, ChartRelease+"-provider-home", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("--chart: the provider's home volume: %w", err)
	}
	return nil
}

// awaitBidding waits until the provider's gateway answers at its node port and says it
// bids; past inClusterTimeout it says what the release's pods are doing.
func (ic *devInCluster) awaitBidding(ctx context.Context, hostURI string) error {
	wctx, cancel := context.WithTimeout(ctx, inClusterTimeout)
	defer cancel()
	err := awaitBidding(wctx, hostURI, nil, nil)
	if _, ended := errors.AsType[*wait.Ended](err); ended && ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return fmt.Errorf("--chart: the provider is not bidding %s after the install: %w\n%s", inClusterTimeout, err, describePods(rctx, ic.cs, ChartNamespace))
	}
	return err
}

// describePods says what each pod of ns is doing: its phase, and each container's
// state, restarts and last exit; then the namespace's warning events.
func describePods(ctx context.Context, cs kubernetes.Interface, ns string) string {
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "the pods: " + err.Error()
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		fmt.Fprintf(&b, "  pod %s: %s", p.Name, p.Status.Phase)
		if p.Status.Reason != "" {
			fmt.Fprintf(&b, " (%s: %s)", p.Status.Reason, p.Status.Message)
		}
		b.WriteString("\n")
		statuses := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
		for j := range statuses {
			c := &statuses[j]
			fmt.Fprintf(&b, "    %s: ready %t, %d restarts", c.Name, c.Ready, c.RestartCount)
			if w := c.State.Waiting; w != nil {
				fmt.Fprintf(&b, ", waiting: %s %s", w.Reason, w.Message)
			}
			if t := c.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, ", last exit %d (%s) %s", t.ExitCode, t.Reason, t.Message)
			}
			b.WriteString("\n")
		}
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err == nil {
		for i := range events.Items {
			e := &events.Items[i]
			fmt.Fprintf(&b, "  event %s/%s: %s: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// checkChart refuses a --chart directory that is not a Helm chart.
func checkChart(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return fmt.Errorf("--chart %s: not a Helm chart (no Chart.yaml): %w", dir, err)
	}
	return nil
}
