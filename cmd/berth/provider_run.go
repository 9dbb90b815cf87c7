package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/node"
)

func newProviderRunCommand(f *ledgerFlags) *cobra.Command {
	var configPath, kubeconfig, metricsListen, logLevel, gatewayListen string
	var check bool
	cmd := &cobra.Command{
		Use:   "run --config provider.yaml",
		Short: "Run the provider: watch the ledger, bid on the orders the cluster can serve",
		Long: "run is the provider daemon. It follows the ledger from where it stopped (the height is\n" +
			"kept under --home), rebuilds its open bids and leases, catches up on open orders, and\n" +
			"bids on the orders its cluster can serve at its configured prices. Settings come from\n" +
			"the config file, then the environment (BERTH_HOME, BERTH_NODE, BERTH_FROM,\n" +
			"BERTH_KUBECONFIG, BERTH_LOG_LEVEL, BERTH_BUS_REDIS), then flags. See docs/bidding.md.\n\n" +
			"--check reads and validates the settings as run would (file, environment, flags) and\n" +
			"exits: 0 and \"valid\" when run would start with them, 2 and the first wrong key otherwise.\n" +
			"It connects to nothing (the ledger's own rules, such as the deposit's denomination, are\n" +
			"checked at start).",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadProviderConfig(configPath, os.Getenv)
			if err != nil {
				return err
			}
			for flag, v := range map[string]struct {
				value string
				field *string
			}{
				"home": {f.home, &cfg.Home}, "node": {f.node, &cfg.Node}, "from": {f.from, &cfg.From},
				"kubeconfig": {kubeconfig, &cfg.Kubeconfig}, "log-level": {logLevel, &cfg.LogLevel},
				"gateway-listen": {gatewayListen, &cfg.Gateway.Listen},
			} {
				if fl := cmd.Flag(flag); fl != nil && fl.Changed {
					*v.field = v.value
				}
			}
			if cfg.Node == "" {
				cfg.Node = nodeAddress("", cfg.Home)
			}
			cfg.Build = rest.BuildInfo{Name: "berth", ServerName: "berth-provider", Version: version, Commit: buildCommit()}
			checked, err := cfg.Check()
			if err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
				return usageError("log_level: %w", err)
			}
			if check {
				return printValid(cmd, configPath)
			}
			// One provider per home: a second one would write the same state files.
			lock, err := node.LockHome(cfg.Home, node.PartProvider)
			if err != nil {
				return err
			}
			defer lock.Release()
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			routeKlog(log)
			p, err := app.NewProvider(cmd.Context(), checked, metricsListen, log)
			if err != nil {
				return err
			}
			for _, line := range []struct{ format, addr string }{{"gateway: https://%s\n", p.Gateway()}, {"metrics: http://%s/metrics\n", p.MetricsAddr()}} {
				if line.addr == "" {
					continue
				}
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), line.format, line.addr); err != nil {
					p.Close() // not run after all
					return err
				}
			}
			return p.Run(cmd.Context())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&configPath, "config", "", "provider configuration file (YAML)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default: the config's, else in-cluster)")
	fl.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9464)")
	fl.StringVar(&gatewayListen, "gateway-listen", "", "serve the tenant gateway (HTTPS) on this address (default: the config's gateway.listen, else 0.0.0.0:8443)")
	fl.StringVar(&logLevel, "log-level", "", "debug, info, warn or error (default: the config's, else info)")
	fl.BoolVar(&check, "check", false, "validate the settings and exit, connecting to nothing")
	return cmd
}

// printValid says that a --check found the settings valid.
func printValid(cmd *cobra.Command, file string) error {
	if file == "" {
		file = "the settings"
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", file)
	return err
}
