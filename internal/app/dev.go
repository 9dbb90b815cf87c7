package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"berth.dev/berth/internal/localenv"
)

// DevConfig configures `berth dev`.
type DevConfig struct {
	// Home holds the dev environment's state; the cluster directory in it is recreated
	// on every start.
	Home string
	// Nodes is the number of simulated CPU nodes; GPUNodes the number of simulated GPU
	// nodes, each with GPUsPerNode devices of GPUModel with GPUMemoryMiB each.
	Nodes, GPUNodes, GPUsPerNode int
	GPUModel                     string
	GPUMemoryMiB                 int
	// NodeCPU and NodeMemory size every node (Kubernetes quantities).
	NodeCPU, NodeMemory string
}

// DefaultDevConfig returns the embedded defaults: three CPU nodes and one node with
// eight 80 GiB A100 GPUs, state under the user's data directory.
func DefaultDevConfig() DevConfig {
	home := os.Getenv("XDG_DATA_HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".local", "share")
		}
	}
	return DevConfig{
		Home:         filepath.Join(home, "berth", "dev"),
		Nodes:        3,
		GPUNodes:     1,
		GPUsPerNode:  8,
		GPUModel:     "NVIDIA-A100-SXM4-80GB",
		GPUMemoryMiB: 81920,
		NodeCPU:      "16",
		NodeMemory:   "64Gi",
	}
}

// Validate reports the first invalid field by its flag name.
func (c DevConfig) Validate() error {
	switch {
	case c.Home == "":
		return errors.New("--home: empty (and no home directory to default to)")
	case c.Nodes < 0 || c.Nodes > 100:
		return fmt.Errorf("--nodes: %d is outside 0–100", c.Nodes)
	case c.GPUNodes < 0 || c.GPUNodes > 100:
		return fmt.Errorf("--gpu-nodes: %d is outside 0–100", c.GPUNodes)
	case c.Nodes+c.GPUNodes == 0:
		return errors.New("--nodes, --gpu-nodes: the cluster needs at least one node")
	case c.GPUNodes > 0 && (c.GPUsPerNode < 1 || c.GPUsPerNode > 64):
		return fmt.Errorf("--gpus-per-node: %d is outside 1–64", c.GPUsPerNode)
	case c.GPUNodes > 0 && strings.TrimSpace(c.GPUModel) == "":
		return errors.New("--gpu-model: empty")
	}
	return nil
}

func (c DevConfig) nodes() []localenv.NodeSpec {
	var specs []localenv.NodeSpec
	for i := range c.Nodes {
		specs = append(specs, localenv.NodeSpec{Name: fmt.Sprintf("dev-node-%d", i+1), CPU: c.NodeCPU, Memory: c.NodeMemory})
	}
	for i := range c.GPUNodes {
		specs = append(specs, localenv.NodeSpec{
			Name: fmt.Sprintf("dev-gpu-node-%d", i+1), CPU: c.NodeCPU, Memory: c.NodeMemory,
			GPUs: c.GPUsPerNode, GPUProduct: c.GPUModel, GPUMemoryMiB: c.GPUMemoryMiB,
		})
	}
	return specs
}

// RunDev starts the local environment, prints what is available on out, and runs until
// ctx ends; then it stops every process it started.
func RunDev(ctx context.Context, cfg DevConfig, log *slog.Logger, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	start := time.Now()
	log.InfoContext(ctx, "starting local Kubernetes control plane", slog.String("home", cfg.Home))
	cp, err := localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{
		Dir:    filepath.Join(cfg.Home, "cluster"),
		Logger: log,
	})
	if err != nil {
		return fmt.Errorf("start local cluster: %w", err)
	}
	defer cp.Stop()
	specs := cfg.nodes()
	if err := cp.AddNodes(ctx, specs...); err != nil {
		return fmt.Errorf("add simulated nodes: %w", err)
	}
	printDevBanner(out, cfg, cp, specs, time.Since(start))

	<-ctx.Done()
	log.InfoContext(ctx, "stopping local environment")
	return nil
}

func printDevBanner(out io.Writer, cfg DevConfig, cp *localenv.ControlPlane, specs []localenv.NodeSpec, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nberth dev: local environment ready in %s\n\n", took.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "  Kubernetes API   %s\n", cp.APIServerURL)
	fmt.Fprintf(&b, "  kubeconfig       %s\n", cp.KubeconfigPath)
	fmt.Fprintf(&b, "  state            %s (its cluster is recreated on every start)\n", cfg.Home)
	fmt.Fprintf(&b, "  nodes (kwok)     ")
	for i, s := range specs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
		if s.GPUs > 0 {
			fmt.Fprintf(&b, " (%d× %s)", s.GPUs, s.GPUProduct)
		}
	}
	b.WriteString("\n\n")
	b.WriteString("  Available now: a simulated cluster (real etcd, kube-apiserver, controller manager and\n")
	b.WriteString("  scheduler; kwok simulates the nodes and runs no containers). Point any Kubernetes client\n")
	b.WriteString("  at the kubeconfig above. `kubectl exec` into a pod runs the command on THIS machine,\n")
	b.WriteString("  in " + cp.ExecDir + ": it is not a sandbox.\n")
	b.WriteString("  Not in this build yet: the marketplace ledger, the provider and the tenant commands.\n\n")
	b.WriteString("  Press Ctrl-C to stop; nothing is left running.\n")
	_, _ = io.WriteString(out, b.String())
}
