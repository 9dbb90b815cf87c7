package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/node"
)

// defaultHome is where berth keeps its node home and keyring unless --home says
// otherwise: $BERTH_HOME, else ~/.berth.
func defaultHome() string { return app.DefaultHome() }

func newChainCommand(log *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "chain",
		Short:   "Run the marketplace ledger (a CometBFT node with berth's market application)",
		GroupID: groupRun,
	}
	cmd.AddCommand(newChainInitCommand(), newChainStartCommand(log))
	return cmd
}

func newChainInitCommand() *cobra.Command {
	var (
		home, chainID, rpc, p2pAddr string
		accounts, hosts, fund       []string
		interval                    time.Duration
		validators                  int
		fast                        bool
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a node home: config, validator key, genesis with funded dev accounts",
		Long: "init creates a new chain in --home: CometBFT's config.toml, a validator and a node key,\n" +
			"and a genesis that funds one account per --accounts name, whose keys it writes to the\n" +
			"home's keyring (DIR/keyring, files readable only by you).\n\n" +
			"With --validators N it makes N homes (DIR/node0 … DIR/node<N-1>) sharing one genesis,\n" +
			"each listing the others as peers at --hosts (one address per validator; default all\n" +
			"127.0.0.1 with distinct ports). Copy node<i> to machine i and run `berth chain start`\n" +
			"there. The dev keys go to node0's keyring.",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if validators < 1 {
				return usageError("--validators %d: want at least 1", validators)
			}
			var coins []market.Coin
			for _, f := range fund {
				coin, err := market.ParseCoin(f)
				if err != nil {
					return usageError("--fund %q: %w", f, err)
				}
				coins = append(coins, coin)
			}
			o := node.InitOptions{ChainID: chainID, BlockInterval: interval, Fast: fast, DevAccounts: accounts, Fund: coins, RPCListen: rpc, P2PListen: p2pAddr}
			var b strings.Builder
			if validators > 1 || len(hosts) > 0 {
				res, err := node.InitNetwork(home, node.NetworkOptions{InitOptions: o, Validators: max(validators, 1), Hosts: hosts})
				if err != nil {
					return err
				}
				for _, r := range res {
					fmt.Fprintf(&b, "validator home %s (node ID %s)\n", r.Home, r.NodeID)
				}
				printAccounts(&b, res[0])
				return writeString(cmd.OutOrStdout(), b.String())
			}
			res, err := node.Init(home, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "chain %s initialised in %s (node ID %s)\n", res.ChainID, res.Home, res.NodeID)
			printAccounts(&b, res)
			fmt.Fprintf(&b, "start it with: berth chain start --home %s\n", home)
			return writeString(cmd.OutOrStdout(), b.String())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&home, "home", defaultHome(), "directory of the new node home (must not exist or be empty of a genesis)")
	f.StringVar(&chainID, "chain-id", node.DefaultChainID, "chain ID")
	f.StringSliceVar(&accounts, "accounts", []string{"tenant", "provider"}, "dev accounts to create and fund (key names)")
	f.StringSliceVar(&fund, "fund", nil, "genesis balances of each dev account, like 1000000uakt,1000000uact (default 1000000000000 of each denomination the ledger takes: "+strings.Join(ledger.DefaultDenoms(), ", ")+")")
	f.DurationVar(&interval, "block-interval", time.Second, "time between blocks (blocks are made even without transactions)")
	f.BoolVar(&fast, "fast", false, "test settings: a block as soon as a transaction arrives, none otherwise")
	f.StringVar(&rpc, "rpc-listen", "", "RPC listen address (default tcp://127.0.0.1:26657)")
	f.StringVar(&p2pAddr, "p2p-listen", "", "p2p listen address (default tcp://127.0.0.1:26656)")
	f.IntVar(&validators, "validators", 1, "number of validator homes to create")
	f.StringSliceVar(&hosts, "hosts", nil, "validators' addresses as peers reach them, one per validator")
	return cmd
}

func printAccounts(out *strings.Builder, r *node.InitResult) {
	if len(r.Accounts) == 0 {
		return
	}
	fmt.Fprintf(out, "funded dev accounts (keys in %s):\n", node.KeyringDir(r.Home))
	for _, a := range r.Accounts {
		fmt.Fprintf(out, "  %-10s %s\n", a.Name, a.Address)
	}
}

func newChainStartCommand(log *slog.Logger) *cobra.Command {
	var home, rpc, p2pAddr, level string
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the node of a home until interrupted",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(level)); err != nil {
				return usageError("--log-level %q: want debug, info, warn or error", level)
			}
			nl := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
			n, err := node.Start(node.Config{Home: home, Logger: nl, RPCListen: rpc, P2PListen: p2pAddr})
			if err != nil {
				return err
			}
			log.Info("ledger node running", slog.String("chain_id", n.ChainID()), slog.String("rpc", n.RPC()),
				slog.String("home", n.Home()), slog.String("node_id", n.NodeID()))
			return n.Run(cmd.Context())
		}),
	}
	f := cmd.Flags()
	f.StringVar(&home, "home", defaultHome(), "node home made by berth chain init")
	f.StringVar(&rpc, "rpc-listen", "", "override the RPC listen address of config.toml")
	f.StringVar(&p2pAddr, "p2p-listen", "", "override the p2p listen address of config.toml")
	f.StringVar(&level, "log-level", "info", "node log level (CometBFT's own chatter is at debug)")
	return cmd
}

// writeString writes s to w.
func writeString(w io.Writer, s string) error {
	_, err := io.WriteString(w, s)
	return err
}

// writeTable writes a header and rows aligned in columns.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeString(w, b.String())
}

// nodeAddress is the RPC address to reach: --node, else the home's config.toml, else
// the default.
func nodeAddress(flag, home string) string {
	if flag != "" {
		return flag
	}
	if c, err := node.LoadConfig(home); err == nil {
		addr := c.RPC.ListenAddress
		// A node listening on all interfaces is reached on loopback.
		return strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)
	}
	return "tcp://127.0.0.1:26657"
}
