package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/bench"
	"berth.dev/berth/internal/chaos"
)

func newBenchCommand(log *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bench",
		Short:   "Measure berth on a private simulated cluster",
		GroupID: groupTools,
		Args:    exactArgs(0),
	}
	cmd.AddCommand(newBenchLeaseReadyCommand(log), newBenchRealLeaseCommand(log), newBenchStatusCommand(log), newBenchChaosCommand(log))
	return cmd
}

func newBenchLeaseReadyCommand(log *slog.Logger) *cobra.Command {
	b := bench.DefaultLeaseReadyBench()
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
			_, err := bench.RunLeaseReadyBench(cmd.Context(), b, cmd.OutOrStdout(), log)
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
	f.BoolVar(&b.Durable, "durable", false, "run the control plane as berth dev's: etcd syncs every write to disk")
	f.StringVar(&b.MemProfile, "memprofile", "", "write a heap profile here when memory is measured")
	f.DurationVar(&b.Timeout, "timeout", b.Timeout, "longest wait for each phase")
	return cmd
}

func newBenchRealLeaseCommand(log *slog.Logger) *cobra.Command {
	b := bench.DefaultRealLeaseBench()
	cmd := &cobra.Command{
		Use:   "real-lease",
		Short: "Time from manifest to the container's first HTTP answer, on a real node",
		Long: "real-lease starts a private control plane with a real node (containerd, runc, a\n" +
			"kubelet; needs root), the ingress controller and the hostname operator, and runs the\n" +
			"provider's cluster service on it. One lease warms the path up; then --leases leases,\n" +
			"one at a time, each torn down before the next, are timed from the manifest handed over\n" +
			"to the first 200 of the echo container through the ingress (its image already on the\n" +
			"node). It prints `name value unit` lines: p50, p99 and max of that, and of the\n" +
			"provider seeing the lease ready. See docs/benchmarks.md.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			_, err := bench.RunRealLeaseBench(cmd.Context(), b, cmd.OutOrStdout(), log)
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVar(&b.Leases, "leases", b.Leases, "leases measured, one at a time")
	f.DurationVar(&b.Timeout, "timeout", b.Timeout, "longest wait for a lease's first answer, and for its teardown")
	return cmd
}

func newBenchStatusCommand(log *slog.Logger) *cobra.Command {
	b := bench.DefaultStatusBench()
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
			_, err := bench.RunStatusBench(cmd.Context(), b, cmd.OutOrStdout(), log)
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

func newBenchChaosCommand(log *slog.Logger) *cobra.Command {
	c := chaos.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Lease lifecycles while providers are killed, the API server and the ledger go down",
		Long: "chaos runs a marketplace on this machine (a ledger node, a control plane with kwok,\n" +
			"and two providers, a and b, as `berth provider run` processes of this binary sharing\n" +
			"the cluster) and drives --lifecycles tenant deployments through create, bid, lease,\n" +
			"manifest, ready, update and close, --concurrency at a time. Meanwhile it kills the\n" +
			"providers (SIGKILL or SIGTERM, mostly a) at random moments up to --kill-pause apart and\n" +
			"starts them again, takes the API server down for --api-outage and stops the ledger node\n" +
			"for --ledger-down once each. After each round it checks that every manifest answered\n" +
			"200 ran, no namespace outlived its lease, no provider touched the other's leases, no\n" +
			"reservation outlived its bid or lease, no lease was closed but by its tenant, and that\n" +
			"all held again within --converge. Every random choice follows --seed (printed). It\n" +
			"prints `name value unit` lines, and exits 1 with the broken promises if any. See\n" +
			"docs/reliability.md.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if c.Berth == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				c.Berth = exe
			}
			c.Out = cmd.OutOrStdout()
			_, err := chaos.Run(cmd.Context(), c, log)
			return err
		}),
	}
	f := cmd.Flags()
	f.IntVar(&c.Lifecycles, "lifecycles", c.Lifecycles, "tenant deployments through their whole life")
	f.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "lifecycles at once (a round each)")
	f.Uint64Var(&c.Seed, "seed", 0, "the random choices' seed (0: a new one, printed)")
	f.DurationVar(&c.KillPause, "kill-pause", c.KillPause, "longest pause between provider kills (0: none)")
	f.DurationVar(&c.APIOutage, "api-outage", c.APIOutage, "API server outage, once (0: none)")
	f.DurationVar(&c.LedgerDown, "ledger-down", c.LedgerDown, "ledger node stop, once (0: none)")
	f.IntVar(&c.Nodes, "nodes", c.Nodes, "simulated nodes (16 CPU, 64 GiB each)")
	f.DurationVar(&c.Converge, "converge", c.Converge, "time the invariants have to hold again after a round's faults")
	f.StringVar(&c.Dir, "dir", "", "where to keep the run's state and provider logs (default: a temporary directory, removed after a clean run)")
	f.StringVar(&c.Berth, "berth", "", "the berth binary the providers run (default: this one)")
	return cmd
}
