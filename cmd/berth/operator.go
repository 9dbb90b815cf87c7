package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
)

func newOperatorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run one of the provider's Kubernetes operators (hostname, ip, inventory)",
		Long: "The operators turn the resources the provider writes for its leases into the cluster's\n" +
			"routing, and describe the cluster for bidding. Each runs as its own process (one Deployment per provider, replicas elect a\n" +
			"leader) and serves /healthz, /readyz and /metrics. berth dev runs them in-process.\n" +
			"See docs/operators.md.",
		GroupID: groupRun,
	}
	cmd.AddCommand(newHostnameOperatorCommand(), newIPOperatorCommand(), newInventoryOperatorCommand())
	return cmd
}

// operatorFlags are the flags every operator command takes.
type operatorFlags struct {
	config, kubeconfig, listen, logLevel string
	check                                bool
}

func (f *operatorFlags) register(cmd *cobra.Command, file, listen string) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "operator configuration file (YAML; see docs/operators.md), e.g. "+file)
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default: the config's, else in-cluster)")
	fl.StringVar(&f.listen, "listen", "", "address of /healthz, /readyz and /metrics (default: the config's, "+listen+")")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.BoolVar(&f.check, "check", false, "validate the settings (file, flags) and exit, connecting to nothing")
}

// load reads the file (if any) with decode, then the flags over it into *kubeconfig
// and *listen, and makes the logger.
func (f *operatorFlags) load(cmd *cobra.Command, name string, decode func([]byte) error, kubeconfig, listen *string) (*slog.Logger, error) {
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return nil, usageError("config: %w", err)
		}
		if err := decode(b); err != nil {
			return nil, usageError("config %s: %w", f.config, err)
		}
	}
	if fl := cmd.Flag("kubeconfig"); fl != nil && fl.Changed {
		*kubeconfig = f.kubeconfig
	}
	if fl := cmd.Flag("listen"); fl != nil && fl.Changed {
		*listen = f.listen
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, usageError("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("operator", name)), nil
}

// started prints where the operator's probes and metrics are.
func started(cmd *cobra.Command, extra string) func(string) {
	return func(addr string) {
		_, _ = fmt.Fprintf(cmd.OutOrStdout(), "probes and metrics: http://%s/{healthz,readyz,metrics%s}\n", addr, extra)
	}
}

func newHostnameOperatorCommand() *cobra.Command {
	var f operatorFlags
	cmd := &cobra.Command{
		Use:   "hostname --config hostname-operator.yaml",
		Short: "Route tenants' hostnames: ProviderHost → Ingress or Gateway API HTTPRoute",
		Long: "hostname watches the provider's ProviderHost resources (one per hostname a lease's HTTP\n" +
			"port accepts) and writes an Ingress (ingress-nginx annotations from the SDL's\n" +
			"http_options, cert-manager TLS if configured) or a Gateway API HTTPRoute for each. A\n" +
			"hostname is routed to one lease only (the oldest claim, across every provider on the\n" +
			"cluster); each ProviderHost's status says whether its route is written, admitted or\n" +
			"answering, or in conflict. Flags override the file.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg := hostname.DefaultConfig()
			log, err := f.load(cmd, "hostname", func(b []byte) (err error) { cfg, err = hostname.DecodeConfig(b); return err }, &cfg.Kubeconfig, &cfg.Listen)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			if f.check {
				return printValid(cmd, f.config)
			}
			op, err := app.NewHostnameOperator(cfg, log, started(cmd, ""))
			if err != nil {
				return err
			}
			return op.Run(cmd.Context())
		}),
	}
	f.register(cmd, "hostname-operator.yaml", "127.0.0.1:8085")
	return cmd
}

func newIPOperatorCommand() *cobra.Command {
	var f operatorFlags
	cmd := &cobra.Command{
		Use:   "ip --config ip-operator.yaml",
		Short: "Give leased IPs addresses: ProviderLeasedIP → LoadBalancer Service (MetalLB)",
		Long: "ip watches the provider's ProviderLeasedIP resources (one per port of a lease on a leased\n" +
			"IP) and writes a LoadBalancer Service for each, with MetalLB's sharing key: a tenant's\n" +
			"ports naming one SDL IP endpoint share one address, in all its deployments, and no two\n" +
			"tenants share. Each ProviderLeasedIP's status has its address, or why MetalLB gives\n" +
			"none. GET /usage reports the pools and the leases on each address. Flags override\n" +
			"the file.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg := ip.DefaultConfig()
			log, err := f.load(cmd, "ip", func(b []byte) (err error) { cfg, err = ip.DecodeConfig(b); return err }, &cfg.Kubeconfig, &cfg.Listen)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			if f.check {
				return printValid(cmd, f.config)
			}
			op, err := app.NewIPOperator(cfg, log, started(cmd, ",usage"))
			if err != nil {
				return err
			}
			return op.Run(cmd.Context())
		}),
	}
	f.register(cmd, "ip-operator.yaml", "127.0.0.1:8086")
	return cmd
}

func newInventoryOperatorCommand() *cobra.Command {
	var f operatorFlags
	cmd := &cobra.Command{
		Use:   "inventory --config inventory-operator.yaml",
		Short: "Describe the cluster for bidding: nodes, GPUs, storage → Inventory resource and node labels",
		Long: "inventory watches the cluster's nodes, pods, claims and storage capacity and publishes an\n" +
			"Inventory resource (cluster-scoped) that providers bid on (their inventory.operator): per\n" +
			"node, what is allocatable and used (per provider), its GPUs named from GPU feature\n" +
			"discovery and node feature discovery labels (no hand-kept list; gpu.models for odd\n" +
			"names), and the offered storage classes' capacity (CSIStorageCapacity, a configured\n" +
			"size, or Rook Ceph). It keeps berth.dev/capabilities.* labels on the nodes, which GPU\n" +
			"pods' affinity selects on. GET /inventory shows the last report. Flags override the file;\n" +
			"$BERTH_BUS_REDIS overrides bus.redis.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg := inventoryop.DefaultConfig()
			log, err := f.load(cmd, "inventory", func(b []byte) (err error) { cfg, err = inventoryop.DecodeConfig(b); return err }, &cfg.Kubeconfig, &cfg.Listen)
			if err != nil {
				return err
			}
			if v := os.Getenv("BERTH_BUS_REDIS"); v != "" {
				cfg.Bus.Redis = v // a URL with a password, from a secret
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			if f.check {
				return printValid(cmd, f.config)
			}
			op, _, err := app.NewInventoryOperator(cfg, log, started(cmd, ",inventory"))
			if err != nil {
				return err
			}
			return op.Run(cmd.Context())
		}),
	}
	f.register(cmd, "inventory-operator.yaml", "127.0.0.1:8087")
	return cmd
}
