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

// operatorCommand is what sets one operator's command apart; newOperator makes the
// rest, the same for each: the flags, the file over the defaults and the flags over
// the file, validation, --check, and the run.
type operatorCommand[C any] struct {
	name, use, short, long string
	// file and listen are the example file name and the default probes' address the
	// flags' help shows; extra, the routes the operator serves beyond the probes.
	file, listen, extra string
	defaults            func() C
	decode              func([]byte) (C, error)
	// settings gives the settings the flags override, and the validation.
	settings func(*C) (kubeconfig, listen *string, validate func() error)
	// env, when set, applies the environment over the file.
	env func(*C)
	new func(C, *slog.Logger, func(addr string)) (*app.Operator, error)
}

func newOperator[C any](o operatorCommand[C]) *cobra.Command {
	var config, kubeconfig, listen, logLevel string
	var check bool
	cmd := &cobra.Command{
		Use: o.use, Short: o.short, Long: o.long,
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg := o.defaults()
			if config != "" {
				b, err := os.ReadFile(config)
				if err != nil {
					return usageError("config: %w", err)
				}
				if cfg, err = o.decode(b); err != nil {
					return usageError("config %s: %w", config, err)
				}
			}
			kc, ls, validate := o.settings(&cfg)
			if cmd.Flag("kubeconfig").Changed {
				*kc = kubeconfig
			}
			if cmd.Flag("listen").Changed {
				*ls = listen
			}
			if o.env != nil {
				o.env(&cfg)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError("--log-level: %w", err)
			}
			if check {
				if err := validate(); err != nil {
					return usageError("%w", err)
				}
				return printValid(cmd, config)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("operator", o.name))
			routeKlog(log)
			op, err := o.new(cfg, log, func(addr string) {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "probes and metrics: http://%s/{healthz,readyz,metrics%s}\n", addr, o.extra)
			})
			if err != nil {
				return err // a refused configuration exits 2 (config.Error)
			}
			defer func() { _ = op.Close() }()
			return op.Run(cmd.Context())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&config, "config", "", "operator configuration file (YAML; see docs/operators.md), e.g. "+o.file)
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default: the config's, else in-cluster)")
	fl.StringVar(&listen, "listen", "", "address of /healthz, /readyz and /metrics (default: the config's, "+o.listen+")")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fl.BoolVar(&check, "check", false, "validate the settings (file, flags) and exit, connecting to nothing")
	return cmd
}

func newHostnameOperatorCommand() *cobra.Command {
	return newOperator(operatorCommand[hostname.Config]{
		name:  "hostname",
		use:   "hostname --config hostname-operator.yaml",
		short: "Route tenants' hostnames: ProviderHost → Ingress or Gateway API HTTPRoute",
		long: "hostname watches the provider's ProviderHost resources (one per hostname a lease's HTTP\n" +
			"port accepts) and writes an Ingress (ingress-nginx annotations from the SDL's\n" +
			"http_options, cert-manager TLS if configured) or a Gateway API HTTPRoute for each. A\n" +
			"hostname is routed to one lease only (the oldest claim, across every provider on the\n" +
			"cluster); each ProviderHost's status says whether its route is written, admitted or\n" +
			"answering, or in conflict. Flags override the file.",
		file: "hostname-operator.yaml", listen: "127.0.0.1:8085",
		defaults: hostname.DefaultConfig, decode: hostname.DecodeConfig,
		settings: func(c *hostname.Config) (*string, *string, func() error) { return &c.Kubeconfig, &c.Listen, c.Validate },
		new:      app.NewHostnameOperator,
	})
}

func newIPOperatorCommand() *cobra.Command {
	return newOperator(operatorCommand[ip.Config]{
		name:  "ip",
		use:   "ip --config ip-operator.yaml",
		short: "Give leased IPs addresses: ProviderLeasedIP → LoadBalancer Service (MetalLB)",
		long: "ip watches the provider's ProviderLeasedIP resources (one per port of a lease on a leased\n" +
			"IP) and writes a LoadBalancer Service for each, with MetalLB's sharing key: a tenant's\n" +
			"ports naming one SDL IP endpoint share one address, in all its deployments, and no two\n" +
			"tenants share. Each ProviderLeasedIP's status has its address, or why MetalLB gives\n" +
			"none. GET /usage reports the pools and the leases on each address. Flags override\n" +
			"the file.",
		file: "ip-operator.yaml", listen: "127.0.0.1:8086", extra: ",usage",
		defaults: ip.DefaultConfig, decode: ip.DecodeConfig,
		settings: func(c *ip.Config) (*string, *string, func() error) { return &c.Kubeconfig, &c.Listen, c.Validate },
		new:      app.NewIPOperator,
	})
}

func newInventoryOperatorCommand() *cobra.Command {
	return newOperator(operatorCommand[inventoryop.Config]{
		name:  "inventory",
		use:   "inventory --config inventory-operator.yaml",
		short: "Describe the cluster for bidding: nodes, GPUs, storage → Inventory resource and node labels",
		long: "inventory watches the cluster's nodes, pods, claims and storage capacity and publishes an\n" +
			"Inventory resource (cluster-scoped) that providers bid on (their inventory.operator): per\n" +
			"node, what is allocatable and used (per provider), its GPUs named from GPU feature\n" +
			"discovery and node feature discovery labels (no hand-kept list; gpu.models for odd\n" +
			"names), and the offered storage classes' capacity (CSIStorageCapacity, a configured\n" +
			"size, or Rook Ceph). It keeps berth.dev/capabilities.* labels on the nodes, which GPU\n" +
			"pods' affinity selects on. GET /inventory shows the last report. Flags override the file;\n" +
			"$BERTH_BUS_REDIS overrides bus.redis.",
		file: "inventory-operator.yaml", listen: "127.0.0.1:8087", extra: ",inventory",
		defaults: inventoryop.DefaultConfig, decode: inventoryop.DecodeConfig,
		settings: func(c *inventoryop.Config) (*string, *string, func() error) {
			return &c.Kubeconfig, &c.Listen, c.Validate
		},
		env: func(c *inventoryop.Config) {
			if v := os.Getenv("BERTH_BUS_REDIS"); v != "" {
				c.Bus.Redis = v // a URL with a password, from a secret
			}
		},
		new: func(c inventoryop.Config, log *slog.Logger, started func(string)) (*app.Operator, error) {
			op, _, err := app.NewInventoryOperator(c, log, started)
			return op, err
		},
	})
}
