package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/bus/redisbus"
)

func newBusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bus",
		Short:   "Look at the event bus between the provider and its operators (Redis)",
		GroupID: groupTools,
	}
	cmd.AddCommand(newBusWatchCommand())
	return cmd
}

func newBusWatchCommand() *cobra.Command {
	var cfg redisbus.Config
	cmd := &cobra.Command{
		Use:   "watch TOPIC --redis URL",
		Short: "Print a topic's events live, one JSON line each (inventory.cluster, inventory.nodes, …)",
		Long: "watch subscribes to TOPIC on the bus's Redis (the bus.redis of the operators' files;\n" +
			"$BERTH_BUS_REDIS when --redis is not given) and prints each event as\n" +
			"a JSON line on standard output until interrupted. When events may have been lost (the\n" +
			"connection to Redis broke, a publisher's events went missing) it says so on standard\n" +
			"error and goes on. See docs/operators.md.",
		Args: exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if cfg.Redis == "" {
				cfg.Redis = os.Getenv("BERTH_BUS_REDIS")
			}
			if cfg.Redis == "" {
				return usageError("--redis: the bus's Redis URL is required (or $BERTH_BUS_REDIS)")
			}
			if err := cfg.Validate(); err != nil {
				return usageError("%w", err)
			}
			return watchBus(cmd.Context(), cfg, args[0], cmd)
		}),
	}
	cmd.Flags().StringVar(&cfg.Redis, "redis", "", "the bus's Redis URL (redis://[user:password@]host:port[/db], rediss:// for TLS)")
	cmd.Flags().StringVar(&cfg.Prefix, "prefix", "", "the channels' prefix (default berth.)")
	cmd.Flags().StringVar(&cfg.CAFile, "ca-file", "", "with a rediss:// URL: the CA (PEM) Redis's certificate is checked against")
	return cmd
}

func watchBus(ctx context.Context, cfg redisbus.Config, topic string, cmd *cobra.Command) error {
	client, err := redisbus.Connect(cfg.Options())
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	if err := client.Ping(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("bus: Redis at --redis does not answer: %w", err)
	}
	local, err := bus.New[json.RawMessage](topic, nil)
	if err != nil {
		return err
	}
	defer local.Close()
	bridge := redisbus.NewBridge(client, topic, local)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- bridge.Run(ctx) }()
	err = watchLocal(ctx, local, cmd)
	cancel()
	return errors.Join(err, <-done)
}

// watchLocal prints local's events until ctx ends, subscribing again after a cut-off.
func watchLocal(ctx context.Context, local *bus.Bus[json.RawMessage], cmd *cobra.Command) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for {
		sub, err := local.Subscribe(1024, nil)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, sub.Close)
		for ev := range sub.Events() {
			if _, err := fmt.Fprintf(out, "%s\n", ev); err != nil {
				stop()
				return err
			}
		}
		stop()
		if ctx.Err() != nil {
			return nil //nolint:nilerr // interrupted: the watch is over
		}
		if errors.Is(sub.Err(), bus.ErrLost) || errors.Is(sub.Err(), bus.ErrOverflow) {
			_, _ = fmt.Fprintf(errOut, "berth bus watch: %v; watching again\n", sub.Err())
			continue
		}
		return sub.Err()
	}
}
