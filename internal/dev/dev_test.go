package dev

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/node"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDevConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Home = "/tmp/x"
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"defaults", func(*Config) {}, ""},
		{"no home", func(c *Config) { c.Home = "" }, "--home"},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "--nodes: -1"},
		{"too many gpu nodes", func(c *Config) { c.GPUNodes = 101 }, "--gpu-nodes: 101"},
		{"no nodes", func(c *Config) { c.Nodes, c.GPUNodes = 0, 0 }, "at least one node"},
		{"zero gpus per node", func(c *Config) { c.GPUsPerNode = 0 }, "--gpus-per-node: 0"},
		{"gpus per node irrelevant without gpu nodes", func(c *Config) { c.GPUNodes, c.GPUsPerNode = 0, 0 }, ""},
		{"blank gpu model", func(c *Config) { c.GPUModels = []string{"NVIDIA-A100-SXM4-80GB", " "} }, "--gpu-model"},
		{"no gpu model", func(c *Config) { c.GPUModels = nil }, "--gpu-model"},
		{"chart without a real node", func(c *Config) { c.Chart = "charts/berth" }, "--chart: the chart's pods need a real node"},
		{"chart with redis", func(c *Config) { c.Chart, c.RealNode, c.Redis = "charts/berth", true, true }, "--chart, --redis: choose one"},
		{"chart on a real node", func(c *Config) { c.Chart, c.RealNode = "charts/berth", true }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestRunDev runs `berth dev` for real: the cluster comes up with the configured nodes,
// the printed kubeconfig works, and cancelling stops everything.
func TestRunDev(t *testing.T) {
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	cfg := DefaultConfig()
	cfg.Home = filepath.Join(t.TempDir(), "dev")
	cfg.Nodes, cfg.GPUNodes, cfg.GPUsPerNode = 2, 2, 4

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, done := startDev(ctx, t, cfg, "berth dev")
	banner := out.String()
	kubeconfig := filepath.Join(cfg.Home, "cluster", "berth.kubeconfig")
	for _, want := range []string{kubeconfig, "dev-node-1, dev-node-2, dev-gpu-node-1 (4× NVIDIA-A100-SXM4-80GB), dev-gpu-node-2 (4× NVIDIA-H100-80GB-HBM3)", "not a sandbox",
		"chain berth-dev (new)", `tenant key    "tenant" akash1`, "balance 1000000000000uakt, 1000000000000uact, 1000000000000" + ledger.DenomUSDC, "export BERTH_HOME=" + cfg.Home,
		"berth tenant deploy examples/web.yaml"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	cs := mustKube(t, kubeconfig)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 4 {
		t.Errorf("cluster has %d nodes, want 4", len(nodes.Items))
	}
	// The inventory operator reported before the banner, and labelled each GPU node
	// with the model it derived from GPU feature discovery's labels.
	for _, n := range nodes.Items {
		want := map[string]string{}
		switch n.Name {
		case "dev-gpu-node-1":
			want[inventory.GPULabel("nvidia", "a100", "", "sxm")] = "true"
		case "dev-gpu-node-2":
			want[inventory.GPULabel("nvidia", "h100", "80Gi", "")] = "true"
			want[inventory.GPULabel("nvidia", "h100", "", "sxm")] = "true"
		}
		want[inventory.StorageLabel("beta3")] = "true"
		for k, v := range want {
			if n.Labels[k] != v {
				t.Errorf("node %s: label %s = %q, want %q (labels %v)", n.Name, k, n.Labels[k], v, inventory.CapabilityLabelsOf(n.Labels))
			}
		}
	}
	gpu, err := cs.CoreV1().Nodes().Get(ctx, "dev-gpu-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := gpu.Status.Allocatable[localenv.ResourceGPU]; q.Value() != 4 {
		t.Errorf("GPU node has %s GPUs, want 4", q.String())
	}
	checkDevVolumes(ctx, t, cs)
	screenCorpus(t, banner)
	// Something for the second start to find: the cluster is kept.
	kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: metav1.NamespaceDefault}, Data: map[string]string{"run": "1"}}
	if kept, err = cs.CoreV1().ConfigMaps(kept.Namespace).Create(ctx, kept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// etcd syncs what it acknowledges: berth dev's cluster outlives it.
	if args := etcdArgs(t, filepath.Join(cfg.Home, "cluster", "etcd")); !slices.Contains(args, "--unsafe-no-fsync=false") {
		t.Errorf("berth dev's etcd runs with %q, want --unsafe-no-fsync=false", args)
	}

	stopRun(t, cancel, done)
	if _, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Error("API server still answers after berth dev stopped")
	}

	// A second start resumes the chain and the cluster; the provider's registration
	// follows its new gateway address, and the simulated nodes follow this start's flags:
	// one plain node and one GPU node, of 2 GPUs, this time.
	cfg.Nodes, cfg.GPUNodes, cfg.GPUsPerNode = 1, 1, 2
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	out2, done := startDev(ctx2, t, cfg, "the second berth dev")
	if !strings.Contains(out2.String(), "chain berth-dev (resumed)") {
		t.Errorf("second start did not resume the chain:\n%s", out2.String())
	}
	cs2 := mustKube(t, kubeconfig) // the kubeconfig is written anew, with the new port
	if got, err := cs2.CoreV1().ConfigMaps(kept.Namespace).Get(ctx2, kept.Name, metav1.GetOptions{}); err != nil || got.UID != kept.UID {
		t.Errorf("the first run's ConfigMap on the second start: %v (UID %v, want %s)", err, got.GetUID(), kept.UID)
	}
	nodes, err = cs2.CoreV1().Nodes().List(ctx2, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		if q := n.Status.Allocatable[localenv.ResourceGPU]; n.Name == "dev-gpu-node-1" && q.Value() != 2 {
			t.Errorf("the GPU node has %s GPUs on the second start, want 2", q.String())
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"dev-gpu-node-1", "dev-node-1"}) {
		t.Errorf("nodes on the second start: %v, want dev-gpu-node-1 and dev-node-1", names)
	}
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("second Run: %v", err)
	}
}

// mustKube is a client of the cluster of the kubeconfig at path.
func mustKube(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cs, err := kubeClient(path)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// etcdArgs is the command line of the etcd running on dataDir.
func etcdArgs(t *testing.T, dataDir string) []string {
	t.Helper()
	for _, args := range localenv.Processes() {
		if len(args) > 0 && filepath.Base(args[0]) == "etcd" && slices.Contains(args, "--data-dir="+dataDir) {
			return args
		}
	}
	t.Fatalf("no etcd runs on %s", dataDir)
	return nil
}

// checkDevVolumes: a claim of a dev storage class is bound to a volume of its size,
// and the volume goes when the claim does.
func checkDevVolumes(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev-volumes"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "beta3"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns.Name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")}},
		},
	}
	created, err := cs.CoreV1().PersistentVolumeClaims(ns.Name).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the claim is bound", func() bool {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns.Name).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound
	})
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(created.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("3Gi")) != 0 || pv.Spec.StorageClassName != class {
		t.Errorf("volume %s: %s of class %q, want 3Gi of %q", pv.Name, q.String(), pv.Spec.StorageClassName, class)
	}
	if err := cs.CoreV1().PersistentVolumeClaims(ns.Name).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the released volume is deleted", func() bool {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func TestResetDevHomeRefusesOtherDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := resetDevHome(dir)
	if err == nil || !strings.Contains(err.Error(), "is not a berth home") {
		t.Fatalf("resetDevHome = %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("the file is gone: %v", err)
	}
	if err := resetDevHome(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("a missing home: %v", err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config", "genesis.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The home's lock files stay (berth dev holds them while it resets).
	lock := filepath.Join(home, node.LockFile(node.PartNode))
	if err := os.WriteFile(lock, []byte("pid 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetDevHome(home); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != filepath.Base(lock) {
		t.Fatalf("home after reset holds %v, want only its lock file", entries)
	}
	// A home holding only lock files may be reset.
	if err := resetDevHome(home); err != nil {
		t.Fatalf("reset of a home with only its lock files: %v", err)
	}
}

// startDev runs berth dev with cfg until ctx ends and returns once its banner says it
// is ready: what it wrote, and where Run's result comes. what names the run in a
// failure.
func startDev(ctx context.Context, t *testing.T, cfg Config, what string) (*testenv.MarkerWriter, <-chan error) {
	t.Helper()
	out := testenv.NewMarkerWriter("Press Ctrl-C")
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), out) }()
	select {
	case <-out.Seen():
	case err := <-done:
		t.Fatalf("%s returned before it was ready: %v\n%s", what, err, out.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s not ready after 3 minutes:\n%s", what, out.String())
	}
	return out, done
}

// TestRunDevWatchesTheCluster kills processes of a running berth dev's cluster: kwok
// is restarted and berth dev runs on; etcd is not, and berth dev stops saying so.
func TestRunDevWatchesTheCluster(t *testing.T) {
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	cfg := DefaultConfig()
	cfg.Home = filepath.Join(t.TempDir(), "dev")
	cfg.Nodes, cfg.GPUNodes = 1, 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, done := startDev(ctx, t, cfg, "berth dev")

	// The processes are found by the paths of this home on their command lines.
	kwokConfig := "--config=" + filepath.Join(cfg.Home, "cluster", "kwok", "config.yaml")
	kwok := pidWith(t, kwokConfig)
	if err := syscall.Kill(kwok, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "a new kwok", func() bool {
		pid := pidWithOrZero(kwokConfig)
		return pid != 0 && pid != kwok
	})
	select {
	case err := <-done:
		t.Fatalf("berth dev stopped after kwok was killed: %v", err)
	default:
	}

	etcd := pidWith(t, "--data-dir="+filepath.Join(cfg.Home, "cluster", "etcd"))
	if err := syscall.Kill(etcd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the local cluster stopped: etcd exited (signal: killed) and it is not restarted") {
			t.Fatalf("Run: %v, want the cluster's failure", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("berth dev still runs a minute after its etcd was killed")
	}
}

// pidWith is the process whose command line has arg.
func pidWith(t *testing.T, arg string) int {
	t.Helper()
	pid := pidWithOrZero(arg)
	if pid == 0 {
		t.Fatalf("no process with %s", arg)
	}
	return pid
}

func pidWithOrZero(arg string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), arg) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err == nil {
			return pid
		}
	}
	return 0
}

// TestCheckChart: --chart must name a Helm chart.
func TestCheckChart(t *testing.T) {
	if err := checkChart(filepath.Join("..", "..", "charts", "berth")); err != nil {
		t.Errorf("charts/berth refused: %v", err)
	}
	if err := checkChart(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a Helm chart (no Chart.yaml)") {
		t.Errorf("an empty directory: err = %v, want not a Helm chart", err)
	}
}

// stopRun cancels a Run and fails the test unless it returns nil within a minute.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop within a minute of cancellation")
	}
}
