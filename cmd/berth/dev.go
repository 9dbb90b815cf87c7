package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/app"
)

func newDevCommand(log *slog.Logger) *cobra.Command {
	cfg := app.DefaultDevConfig()
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local environment on embedded defaults (simulated Kubernetes cluster)",
		Long: "dev starts a private Kubernetes control plane on this machine (etcd, kube-apiserver,\n" +
			"controller manager, scheduler) with kwok-simulated nodes, prints how to reach it,\n" +
			"and runs until interrupted. The binaries come from hack/testbin.sh ($BERTH_TESTBIN).",
		GroupID: groupRun,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			return app.RunDev(cmd.Context(), cfg, log, cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "directory for the environment's state")
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of simulated CPU nodes")
	f.IntVar(&cfg.GPUNodes, "gpu-nodes", cfg.GPUNodes, "number of simulated GPU nodes")
	f.IntVar(&cfg.GPUsPerNode, "gpus-per-node", cfg.GPUsPerNode, "GPUs on each GPU node")
	f.StringVar(&cfg.GPUModel, "gpu-model", cfg.GPUModel, "GPU product label of the GPU nodes")
	f.IntVar(&cfg.GPUMemoryMiB, "gpu-memory-mib", cfg.GPUMemoryMiB, "memory of each GPU in MiB")
	f.StringVar(&cfg.NodeCPU, "node-cpu", cfg.NodeCPU, "CPU capacity of every node")
	f.StringVar(&cfg.NodeMemory, "node-memory", cfg.NodeMemory, "memory capacity of every node")
	return cmd
}
