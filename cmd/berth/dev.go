package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/gateway/rest"
)

func newDevCommand(log *slog.Logger) *cobra.Command {
	cfg := dev.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole marketplace on this machine: ledger, simulated cluster, provider",
		Long: "dev runs berth's main job on its embedded defaults: a ledger node (1 block/s, the funded\n" +
			"dev accounts \"tenant\" and \"provider\"; kept in --home and resumed on the next start,\n" +
			"--reset for a new chain), a private Kubernetes control plane (etcd, kube-apiserver,\n" +
			"controller manager, scheduler) with kwok-simulated nodes and simulated persistent\n" +
			"volumes, berth's CRDs, and the provider, registered on the ledger with its gateway.\n" +
			"It prints what a tenant needs and runs until interrupted; Ctrl-C stops everything.\n" +
			"Every server listens on 127.0.0.1 on free ports. The Kubernetes binaries come from\n" +
			"$BERTH_TESTBIN, else hack/testbin.sh in the source tree (built when missing).\n\n" +
			"--config FILE gives the provider a provider.yaml, read as `provider run` reads it\n" +
			"(docs/bidding.md): its keys override the dev provider's (pricing, attributes, tenants\n" +
			"allow/deny lists, budgets, limits…). berth dev refuses the keys it sets itself: home,\n" +
			"from, node, kubeconfig, host_uri, log_level, gateway.listen, gateway.grpc_listen and\n" +
			"cluster.install_crds. The file's attributes replace host, region and tier; the dev\n" +
			"cluster's capabilities are added (the file may not declare capabilities/…). Only a new\n" +
			"chain's genesis has auditors sign them (docs/dev.md).\n\n" +
			"--redis runs the provider and the three operators as processes of their own (this\n" +
			"binary, with the files berth dev writes under HOME/cluster/processes), their bus over\n" +
			"a redis-server berth dev starts (Debian's redis-server; make dev installs it): the\n" +
			"layout of a real installation, on one machine. A process that exits is restarted.\n\n" +
			"--chart DIR (with --real-node) installs the provider and its three operators with the Helm\n" +
			"chart in DIR (charts/berth) as pods of the real node, as a provider runs them in its\n" +
			"cluster: an image of this berth binary (static: make build) pushed to the dev registry, the\n" +
			"provider's key as a Secret, the gateway on node ports of 127.0.0.1, the ledger node reached\n" +
			"by the pods through a DNAT rule. helm is $BERTH_HELM, else hack/tool.sh helm's, else the PATH's.",
		GroupID: groupRun,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg.WithdrawPeriodSet = cmd.Flag("withdraw-period").Changed
			cfg.Command = selfName()
			cfg.Build = rest.BuildInfo{Name: "berth", ServerName: "berth-provider", Version: version, Commit: buildCommit()}
			routeKlog(log)
			return dev.Run(cmd.Context(), cfg, log, cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Home, "home", cfg.Home, "berth home: the chain, keyring and provider state (resumed when present)")
	f.BoolVar(&cfg.Reset, "reset", false, "remove the home's chain and state first, for a new chain")
	f.StringVar(&cfg.ProviderConfig, "config", "", "provider.yaml whose keys override the dev provider's defaults (see above for the keys berth dev refuses)")
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of simulated CPU nodes")
	f.IntVar(&cfg.GPUNodes, "gpu-nodes", cfg.GPUNodes, "number of simulated GPU nodes")
	f.IntVar(&cfg.GPUsPerNode, "gpus-per-node", cfg.GPUsPerNode, "GPUs on each GPU node")
	f.StringSliceVar(&cfg.GPUModels, "gpu-model", cfg.GPUModels, "GPU products of the GPU nodes, as GPU feature discovery labels them (comma-separated: the nodes take them in turn)")
	f.IntVar(&cfg.GPUMemoryMiB, "gpu-memory-mib", cfg.GPUMemoryMiB, "memory of each GPU in MiB")
	f.StringVar(&cfg.NodeCPU, "node-cpu", cfg.NodeCPU, "CPU capacity of every node")
	f.StringVar(&cfg.NodeMemory, "node-memory", cfg.NodeMemory, "memory capacity of every node")
	f.BoolVar(&cfg.RealNode, "real-node", false, "run workloads for real: this machine is the cluster's node (containerd, runc, a kubelet; needs root), with an ingress controller on a loopback port")
	f.BoolVar(&cfg.Redis, "redis", false, "run the provider and the operators as separate processes over a local redis-server")
	f.StringVar(&cfg.Chart, "chart", "", "with --real-node: install the provider and its operators from this Helm chart (charts/berth) as pods, instead of running them here")
	f.StringVar(&cfg.Executable, "chart-binary", "", "with --chart: the berth binary the image holds (default: this one); it must be static (make build makes one)")
	f.DurationVar(&cfg.WithdrawPeriod, "withdraw-period", cfg.WithdrawPeriod, "how often the provider withdraws its earnings (0: only when funds run low; beats the --config file's balance.withdraw_period)")
	return cmd
}
