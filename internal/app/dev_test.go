package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestDevConfigValidate(t *testing.T) {
	ok := DefaultDevConfig()
	ok.Home = "/tmp/x"
	tests := []struct {
		name   string
		mutate func(*DevConfig)
		want   string
	}{
		{"defaults", func(*DevConfig) {}, ""},
		{"no home", func(c *DevConfig) { c.Home = "" }, "--home"},
		{"negative nodes", func(c *DevConfig) { c.Nodes = -1 }, "--nodes: -1"},
		{"too many gpu nodes", func(c *DevConfig) { c.GPUNodes = 101 }, "--gpu-nodes: 101"},
		{"no nodes", func(c *DevConfig) { c.Nodes, c.GPUNodes = 0, 0 }, "at least one node"},
		{"zero gpus per node", func(c *DevConfig) { c.GPUsPerNode = 0 }, "--gpus-per-node: 0"},
		{"gpus per node irrelevant without gpu nodes", func(c *DevConfig) { c.GPUNodes, c.GPUsPerNode = 0, 0 }, ""},
		{"blank gpu model", func(c *DevConfig) { c.GPUModel = " " }, "--gpu-model"},
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

// syncBuffer is an io.Writer that tells when a marker has been written.
type syncBuffer struct {
	mu     sync.Mutex
	b      strings.Builder
	marker string
	seen   chan struct{}
	once   sync.Once
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if strings.Contains(s.b.String(), s.marker) {
		s.once.Do(func() { close(s.seen) })
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunDev runs `berth dev` for real: the cluster comes up with the configured nodes,
// the printed kubeconfig works, and cancelling stops everything.
func TestRunDev(t *testing.T) {
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	cfg := DefaultDevConfig()
	cfg.Home = filepath.Join(t.TempDir(), "dev")
	cfg.Nodes, cfg.GPUNodes, cfg.GPUsPerNode = 2, 1, 4

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &syncBuffer{marker: "Press Ctrl-C", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- RunDev(ctx, cfg, slog.New(slog.DiscardHandler), out) }()

	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("RunDev returned before it was ready: %v\n%s", err, out.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("berth dev not ready after 3 minutes:\n%s", out.String())
	}
	banner := out.String()
	kubeconfig := filepath.Join(cfg.Home, "cluster", "admin.kubeconfig")
	for _, want := range []string{kubeconfig, "dev-node-1, dev-node-2, dev-gpu-node-1 (4× NVIDIA-A100-SXM4-80GB)", "not a sandbox"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Errorf("cluster has %d nodes, want 3", len(nodes.Items))
	}
	gpu, err := cs.CoreV1().Nodes().Get(ctx, "dev-gpu-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := gpu.Status.Allocatable[localenv.ResourceGPU]; q.Value() != 4 {
		t.Errorf("GPU node has %s GPUs, want 4", q.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunDev: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunDev did not stop within a minute of cancellation")
	}
	if _, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Error("API server still answers after berth dev stopped")
	}
}
