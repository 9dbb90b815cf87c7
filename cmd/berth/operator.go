package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/operator/hostname"
)

func newOperatorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run one of the provider's Kubernetes operators (hostname)",
		Long: "The operators turn the resources the provider writes for its leases into the cluster's\n" +
			"routing. Each runs as its own process (one Deployment per provider, replicas elect a\n" +
			"leader) and serves /healthz, /readyz and /metrics. berth dev runs them in-process.\n" +
			"See docs/operators.md.",
		GroupID: groupRun,
	}
	cmd.AddCommand(newHostnameOperatorCommand())
	return cmd
}

func newHostnameOperatorCommand() *cobra.Command {
	var configPath, kubeconfig, listen, logLevel string
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
			if configPath != "" {
				b, err := os.ReadFile(configPath)
				if err != nil {
					return usageError("config: %w", err)
				}
				if cfg, err = hostname.DecodeConfig(b); err != nil {
					return usageError("config %s: %w", configPath, err)
				}
			}
			for flag, v := range map[string]struct {
				value string
				field *string
			}{"kubeconfig": {kubeconfig, &cfg.Kubeconfig}, "listen": {listen, &cfg.Listen}} {
				if fl := cmd.Flag(flag); fl != nil && fl.Changed {
					*v.field = v.value
				}
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("operator", "hostname"))
			op, err := app.NewHostnameOperator(cfg, log, func(addr string) {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "probes and metrics: http://%s/{healthz,readyz,metrics}\n", addr)
			})
			if err != nil {
				return err
			}
			return op.Run(cmd.Context())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&configPath, "config", "", "hostname operator configuration file (YAML; see docs/operators.md)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default: the config's, else in-cluster)")
	fl.StringVar(&listen, "listen", "", "address of /healthz, /readyz and /metrics (default: the config's, 127.0.0.1:8085)")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
