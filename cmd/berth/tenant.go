package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/gateway/client"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/node"
)

// ledgerFlags are the flags of commands that talk to the ledger.
type ledgerFlags struct {
	home, node, from, output string
	timeout                  time.Duration
}

func (f *ledgerFlags) register(fs *pflag.FlagSet, from string) {
	fs.StringVar(&f.home, "home", defaultHome(), "berth home (keyring, and the node address from its config.toml)")
	fs.StringVar(&f.node, "node", "", "ledger node RPC address (default: the home's node, else tcp://127.0.0.1:26657)")
	fs.StringVar(&f.from, "from", from, "name of the key that signs")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the node and for a transaction to be in a block")
}

func (f *ledgerFlags) checkOutput() error {
	if f.output != "text" && f.output != "json" {
		return usageError("--output %q: want text or json", f.output)
	}
	return nil
}

// session is a connection to the ledger with the signing key, for one command.
type session struct {
	c    *chain.Client
	key  keys.Info
	priv ledger.PrivKey // when signing
	br   *chain.Broadcaster
	out  io.Writer
	json bool
	// say prints a progress line (to standard error; deploy prints its own way).
	say func(line string)
	// gateways are the provider clients made in the session, closed with it.
	gateways []*client.Client
}

// close ends the session: its gateway clients (dials still in flight too), then its
// ledger connection.
func (s *session) close() {
	for _, gc := range s.gateways {
		gc.Close()
	}
	s.c.Close()
}

func (f *ledgerFlags) connect(ctx context.Context, cmd *cobra.Command, signing bool) (_ *session, err error) {
	if err := f.checkOutput(); err != nil {
		return nil, err
	}
	c, err := chain.Dial(ctx, nodeAddress(f.node, f.home))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	progress := cmd.ErrOrStderr()
	s := &session{c: c, out: cmd.OutOrStdout(), json: f.output == "json", say: func(line string) { _, _ = fmt.Fprintln(progress, line) }}
	// Queries need the key too: its address is whose deployments and leases to list.
	kr, err := keys.Open(node.KeyringDir(f.home), c.Params().AddressPrefix)
	if err != nil {
		return nil, err
	}
	if s.key, err = kr.Show(f.from); err != nil {
		return nil, err
	}
	if signing {
		if s.priv, err = kr.Signer(f.from); err != nil {
			return nil, err
		}
		if s.br, err = chain.NewBroadcaster(c, s.priv, chain.BroadcastOptions{Timeout: f.timeout}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// with runs fn with a connection to the ledger (and the signing key when signing),
// all within --timeout.
func (f *ledgerFlags) with(cmd *cobra.Command, signing bool, fn func(ctx context.Context, s *session) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	s, err := f.connect(ctx, cmd, signing)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(ctx, s)
}

// report prints a transaction's outcome: its block and events.
func (s *session) report(what string, res *chain.Result) error {
	if s.json {
		return writeJSON(s.out, res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: in block %d (tx %X)\n", what, res.Height, res.TxHash)
	for _, e := range res.Events {
		fmt.Fprintf(&b, "  %s %s\n", e.Type, formatAttrs(e.Attrs))
	}
	return writeString(s.out, b.String())
}

func formatAttrs(a map[string]string) string {
	order := []string{ledger.AttrOwner, ledger.AttrDSeq, ledger.AttrGSeq, ledger.AttrOSeq, ledger.AttrProvider}
	var parts []string
	done := map[string]bool{}
	for _, k := range order {
		if v, ok := a[k]; ok {
			parts = append(parts, k+"="+v)
			done[k] = true
		}
	}
	rest := make([]string, 0, len(a))
	for k, v := range a {
		if !done[k] {
			rest = append(rest, k+"="+v)
		}
	}
	slices.Sort(rest)
	return strings.Join(append(parts, rest...), " ")
}

func uintStr(v uint64) string { return strconv.FormatUint(v, 10) }

func parseDSeq(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, usageError("DSEQ %q: want a positive number", s)
	}
	return v, nil
}

func newTenantCommand() *cobra.Command {
	var f ledgerFlags
	cmd := &cobra.Command{
		Use:     "tenant",
		Short:   "Deploy on the marketplace: deployments, bids, leases",
		GroupID: groupTools,
	}
	f.register(cmd.PersistentFlags(), "tenant")
	dep := &cobra.Command{Use: "deployment", Short: "Create, fund, list and close deployments"}
	dep.AddCommand(newDeploymentCreateCommand(&f), newDeploymentUpdateCommand(&f), newDeploymentDepositCommand(&f), newDeploymentCloseCommand(&f), newDeploymentListCommand(&f))
	lease := &cobra.Command{Use: "lease", Short: "Accept a bid (create a lease), close a lease, or see it on its provider"}
	lease.AddCommand(newLeaseCreateCommand(&f), newLeaseCloseCommand(&f))
	lease.AddCommand(newLeaseStatusCommand(&f), newLeaseLogsCommand(&f), newLeaseEventsCommand(&f), newLeaseShellCommand(&f),
		newLeaseMigrateCommand(&f, "endpoints"), newLeaseMigrateCommand(&f, "hostnames"))
	closeCmd := newDeploymentCloseCommand(&f)
	closeCmd.Short = "Close a deployment (same as `deployment close`): its leases end, its escrow balance comes back"
	cmd.AddCommand(dep, newBidsCommand(&f), lease, newLeasesCommand(&f), newCertCommand(&f), newSendManifestCommand(&f),
		newTenantDeployCommand(&f), closeCmd)
	return cmd
}

func newDeploymentCreateCommand(f *ledgerFlags) *cobra.Command {
	var dseq uint64
	var deposit string
	var strict bool
	cmd := &cobra.Command{
		Use:   "create FILE",
		Short: "Create a deployment from an SDL file (\"-\" reads standard input)",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			r, err := readSDL(cmd, args[0], strict)
			if err != nil {
				return err
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				if dseq == 0 {
					// As Akash tools do: the current height is a fresh sequence.
					h, err := s.c.Height(ctx)
					if err != nil {
						return err
					}
					dseq = uint64(max(h, 1))
				}
				denom := r.Groups[0].Resources[0].Price.Denom
				var dep market.Coin
				if deposit != "" {
					if dep, err = market.ParseCoin(deposit); err != nil {
						return usageError("--deposit: %w", err)
					}
				} else {
					p := s.c.Params()
					for _, c := range p.DeploymentMinDeposit {
						if c.Denom == denom {
							dep = c
						}
					}
					if dep.Denom == "" {
						return fmt.Errorf("the ledger has no minimum deposit in %s; give --deposit", denom)
					}
				}
				id := market.DeploymentID{Owner: s.key.Address, DSeq: dseq}
				res, err := s.br.Broadcast(ctx, &ledger.MsgCreateDeployment{ID: id, Groups: r.Groups, Version: r.Version, Deposit: dep})
				if err != nil {
					return fmt.Errorf("create deployment %s: %w", id, err)
				}
				if !s.json {
					if err := writeString(s.out, fmt.Sprintf("deployment %s created, version %s, deposit %s\n", id, hex.EncodeToString(r.Version), dep)); err != nil {
						return err
					}
				}
				return s.report("create deployment", res)
			})
		}),
	}
	cmd.Flags().Uint64Var(&dseq, "dseq", 0, "deployment sequence (default: the current block height)")
	cmd.Flags().StringVar(&deposit, "deposit", "", "escrow deposit, like 5000000uakt (default: the ledger's minimum)")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat SDL warnings as errors")
	return cmd
}

func newDeploymentDepositCommand(f *ledgerFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "deposit DSEQ AMOUNT",
		Short: "Add funds (like 5000000uakt) to a deployment's escrow",
		Args:  exactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dseq, err := parseDSeq(args[0])
			if err != nil {
				return err
			}
			amt, err := market.ParseCoin(args[1])
			if err != nil {
				return usageError("AMOUNT: %w", err)
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				id := market.DeploymentID{Owner: s.key.Address, DSeq: dseq}
				res, err := s.br.Broadcast(ctx, &ledger.MsgDepositDeployment{ID: id, Amount: amt, Depositor: s.key.Address})
				if err != nil {
					return fmt.Errorf("deposit to %s: %w", id, err)
				}
				return s.report("deposit", res)
			})
		}),
	}
}

func newDeploymentCloseCommand(f *ledgerFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "close DSEQ",
		Short: "Close a deployment: its leases end and what is left in escrow comes back",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dseq, err := parseDSeq(args[0])
			if err != nil {
				return err
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				id := market.DeploymentID{Owner: s.key.Address, DSeq: dseq}
				res, err := s.br.Broadcast(ctx, &ledger.MsgCloseDeployment{ID: id})
				if err != nil {
					return fmt.Errorf("close %s: %w", id, err)
				}
				return s.report("close deployment", res)
			})
		}),
	}
}

func newDeploymentListCommand(f *ledgerFlags) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your deployments with their groups and escrow",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return f.with(cmd, false, func(ctx context.Context, s *session) error {
				all, err := listAll(ctx, s, ledger.QueryDeployments, ledger.DeploymentsRequest{Owner: s.key.Address, State: state},
					func(r ledger.DeploymentsResponse) []ledger.DeploymentResponse { return r.Deployments })
				if err != nil {
					return err
				}
				return printList(s, all, []string{"DSEQ", "STATE", "GROUPS", "ESCROW", "RATE/BLOCK"}, func(d *ledger.DeploymentResponse) []string {
					var gs []string
					for j := range d.Groups {
						gs = append(gs, fmt.Sprintf("%d:%s", d.Groups[j].ID.GSeq, d.Groups[j].State))
					}
					return []string{uintStr(d.Deployment.ID.DSeq), d.Deployment.State, strings.Join(gs, ","), d.Escrow.Balance.String(), d.Escrow.Rate.String()}
				})
			})
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only deployments in this state (active, closed)")
	return cmd
}

// listAll reads every page of a list query; items takes a page's items.
func listAll[Req ledger.PagedRequest[Req], Resp ledger.PagedResponse, T any](ctx context.Context, s *session, q ledger.Query[Req, Resp], req Req, items func(Resp) []T) ([]T, error) {
	all := []T{}
	err := ledger.List(ctx, s.c, q, req, func(r Resp) error {
		all = append(all, items(r)...)
		return nil
	})
	return all, err
}

// printList prints items as JSON or as a table with a row per item.
func printList[T any](s *session, items []T, header []string, row func(*T) []string) error {
	if s.json {
		return writeJSON(s.out, items)
	}
	rows := make([][]string, 0, len(items))
	for i := range items {
		rows = append(rows, row(&items[i]))
	}
	return writeTable(s.out, header, rows)
}

func newBidsCommand(f *ledgerFlags) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "bids DSEQ",
		Short: "List the bids on a deployment's orders",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			dseq, err := parseDSeq(args[0])
			if err != nil {
				return err
			}
			return f.with(cmd, false, func(ctx context.Context, s *session) error {
				all, err := listAll(ctx, s, ledger.QueryBids, ledger.BidsRequest{Owner: s.key.Address, DSeq: dseq, State: state},
					func(r ledger.BidsResponse) []ledger.Bid { return r.Bids })
				if err != nil {
					return err
				}
				return printList(s, all, []string{"GSEQ", "OSEQ", "PROVIDER", "PRICE/BLOCK", "STATE"}, func(b *ledger.Bid) []string {
					return []string{uintStr(uint64(b.ID.GSeq)), uintStr(uint64(b.ID.OSeq)), b.ID.Provider, b.Price.String(), b.State}
				})
			})
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only bids in this state (open, active, lost, closed)")
	return cmd
}

// parseOrderRef reads DSEQ/GSEQ/OSEQ of the signer's deployment.
func parseOrderRef(owner, s string) (market.OrderID, error) {
	id, err := market.ParseOrderID(owner + "/" + s)
	if err != nil {
		return market.OrderID{}, usageError("%q: want DSEQ/GSEQ/OSEQ, like 123/1/1", s)
	}
	return id, nil
}

// newLeaseCommand builds a command acting on one lease of the signer's deployment,
// named DSEQ/GSEQ/OSEQ --provider ADDRESS.
func newLeaseCommand(f *ledgerFlags, use, short, see, what string, msg func(s *session, bid market.BidID) ledger.Msg) *cobra.Command {
	var provider string
	cmd := &cobra.Command{
		Use:   use + " DSEQ/GSEQ/OSEQ --provider ADDRESS",
		Short: short,
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if provider == "" {
				return usageError("--provider is required (see %s)", see)
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				oid, err := parseOrderRef(s.key.Address, args[0])
				if err != nil {
					return err
				}
				bid := oid.Bid(provider)
				res, err := s.br.Broadcast(ctx, msg(s, bid))
				if err != nil {
					return fmt.Errorf("%s %s: %w", what, bid, err)
				}
				return s.report(what, res)
			})
		}),
	}
	cmd.Flags().StringVar(&provider, "provider", "", "address of the provider")
	return cmd
}

func newLeaseCreateCommand(f *ledgerFlags) *cobra.Command {
	return newLeaseCommand(f, "create", "Accept a provider's bid on an order", "berth tenant bids DSEQ", "create lease",
		func(_ *session, bid market.BidID) ledger.Msg { return &ledger.MsgCreateLease{BidID: bid} })
}

func newLeaseCloseCommand(f *ledgerFlags) *cobra.Command {
	return newLeaseCommand(f, "close", "End a lease (its group closes; the provider is paid to this block)", "berth tenant leases", "close lease",
		func(s *session, bid market.BidID) ledger.Msg {
			return &ledger.MsgCloseLease{ID: bid.Lease(), Sender: s.key.Address, Reason: ledger.ReasonOwner}
		})
}

func newLeasesCommand(f *ledgerFlags) *cobra.Command {
	var state string
	var dseq uint64
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List your leases with what they have accrued",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return f.with(cmd, false, func(ctx context.Context, s *session) error {
				all, err := leases(ctx, s, ledger.LeasesRequest{Owner: s.key.Address, DSeq: dseq, State: state})
				if err != nil {
					return err
				}
				return printLeases(s, all)
			})
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only leases in this state (active, insufficient_funds, closed)")
	cmd.Flags().Uint64Var(&dseq, "dseq", 0, "only the leases of this deployment")
	return cmd
}

// leases reads every lease the request selects.
func leases(ctx context.Context, s *session, req ledger.LeasesRequest) ([]ledger.LeaseResponse, error) {
	return listAll(ctx, s, ledger.QueryLeases, req, func(r ledger.LeasesResponse) []ledger.LeaseResponse { return r.Leases })
}

func printLeases(s *session, all []ledger.LeaseResponse) error {
	return printList(s, all, []string{"DSEQ", "GSEQ", "OSEQ", "PROVIDER", "PRICE/BLOCK", "STATE", "ACCRUED", "WITHDRAWN"}, func(l *ledger.LeaseResponse) []string {
		return []string{uintStr(l.Lease.ID.DSeq), uintStr(uint64(l.Lease.ID.GSeq)), uintStr(uint64(l.Lease.ID.OSeq)), l.Lease.ID.Provider,
			l.Lease.Price.String(), l.Lease.State, l.Payment.Balance.Amount.String(), l.Payment.Withdrawn.Amount.String()}
	})
}
