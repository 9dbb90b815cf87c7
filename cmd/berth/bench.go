package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/app"
)

func newBenchCommand(log *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bench",
		Short:   "Measure berth on a private simulated cluster",
		GroupID: groupTools,
		Args:    exactArgs(0),
	}
	cmd.AddCommand(newBenchLeaseReadyCommand(log), newBenchStatusCommand(log))
	return cmd
}

func newBenchLeaseReadyCommand(log *slog.Logger) *cobra.Command {
	b := app.DefaultLeaseReadyBench()
	cmd := &cobra.Command{
		Use:   "lease-ready",
		Short: "Time from manifest to every replica ready, a burst of leases, memory per lease",
		Long: "lease-ready starts a private control plane with kwok (its own rate limits lifted, so the\n" +
			"figures are berth's), adds --nodes simulated nodes, and runs the provider's cluster\n" +
			"service on it: --leases leases are reserved as won bids are and their manifests handed\n" +
			"over, first at --rate per second (latency), then --burst of them at once. It prints\n" +
			"`name value unit` lines: p50/p99 time to all replicas ready as the provider observes\n" +
			"it, the time for the burst, RSS and Go heap per active lease, and the teardown time.\n" +
			"The binaries come from hack/testbin.sh. See docs/benchmarks.md.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := b.Validate(); err != nil {
				return usageError("%w", err)
			}
			_, err := app.RunLeaseReadyBench(cmd.Context(), b, cmd.OutOrStdout(), log)
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVar(&b.Nodes, "nodes", b.Nodes, "simulated nodes (8 CPU, 32 GiB each)")
	f.IntVar(&b.Leases, "leases", b.Leases, "leases in all (three pods each)")
	f.IntVar(&b.Burst, "burst", b.Burst, "of the leases, how many arrive at once, after the others")
	f.Float64Var(&b.Rate, "rate", b.Rate, "leases per second before the burst")
	f.Float64Var(&b.KubeQPS, "kube-qps", b.KubeQPS, "berth's Kubernetes client rate limit")
	f.IntVar(&b.KubeBurst, "kube-burst", b.KubeBurst, "berth's Kubernetes client burst")
	f.IntVar(&b.DeployConcurrency, "deploy-concurrency", b.DeployConcurrency, "leases applied at once (the provider's cluster.deploy_concurrency)")
	f.BoolVar(&b.Teardown, "teardown", b.Teardown, "close every lease at the end and time the teardown")
	f.StringVar(&b.MemProfile, "memprofile", "", "write a heap profile here when memory is measured")
	f.DurationVar(&b.Timeout, "timeout", b.Timeout, "longest wait for each phase")
	return cmd
}

func newBenchStatusCommand(log *slog.Logger) *cobra.Command {
	b := app.DefaultStatusBench()
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Latency of the gateway's GET /status at a fixed request rate",
		Long: "status starts a gateway on loopback serving a status snapshot of --nodes nodes (or\n" +
			"measures the gateway at --target) and sends GET /status at --rps for --duration over\n" +
			"--connections keep-alive TLS connections, on schedule whatever the answers' pace. It\n" +
			"prints `name value unit` lines: p50, p99 and max latency (from when each request was\n" +
			"due), errors, requests, the rate achieved and the answer's size. See docs/benchmarks.md.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := b.Validate(); err != nil {
				return usageError("%w", err)
			}
			_, err := app.RunStatusBench(cmd.Context(), b, cmd.OutOrStdout(), log)
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVar(&b.RPS, "rps", b.RPS, "requests a second")
	f.DurationVar(&b.Duration, "duration", b.Duration, "how long to send")
	f.IntVar(&b.Connections, "connections", b.Connections, "keep-alive connections")
	f.IntVar(&b.Nodes, "nodes", b.Nodes, "nodes in the in-process gateway's status")
	f.StringVar(&b.Target, "target", "", "a running gateway to measure instead (https://host:port)")
	return cmd
}
