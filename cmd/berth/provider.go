package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/provider"
)

func newProviderCommand() *cobra.Command {
	var f ledgerFlags
	cmd := &cobra.Command{
		Use:     "provider",
		Short:   "A provider's ledger business: registration, leases, withdrawals",
		GroupID: groupTools,
	}
	f.register(cmd.PersistentFlags(), "provider")
	cmd.AddCommand(newProviderRegisterCommand(&f), newProviderBidCommand(&f), newProviderCloseBidCommand(&f),
		newProviderLeasesCommand(&f), newProviderWithdrawCommand(&f), newProviderRunCommand(&f), newProviderStatusCommand(&f),
		newProviderDecisionsCommand(&f))
	return cmd
}

func newProviderStatusCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	cmd := &cobra.Command{
		Use:   "status [ADDRESS]",
		Short: "Show a provider's status from its gateway (default: the --from key's provider)",
		Long: "status asks a provider's gateway (at the host URI it registered on the ledger) for its\n" +
			"status: leases, inventory, bid engine, manifests, and berth's additions, among them the\n" +
			"balance checker's view of the account and earnings. It prints the JSON as served.",
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				addr, gc, err := g.providerGateway(ctx, f, s, args)
				if err != nil {
					return err
				}
				raw, err := gc.Status(ctx)
				if err != nil {
					return err
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return fmt.Errorf("provider %s status: %w", addr, err)
				}
				return writeJSON(s.out, v)
			})
		}),
	}
	g.register(cmd.Flags())
	return cmd
}

func newProviderDecisionsCommand(f *ledgerFlags) *cobra.Command {
	var (
		g     gatewayFlags
		order string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "decisions [ADDRESS]",
		Short: "Show why the bid engine bid or did not bid on recent orders (the provider's own key)",
		Long: "decisions asks the --from key's provider gateway what its bid engine decided lately,\n" +
			"newest first: a bid (and its price), no bid (the reason and its detail), a bid the\n" +
			"ledger refused, and what became of bids (won, lost, closed). Only the provider's own\n" +
			"account may read it (ADDRESS, default the --from key's, names the provider to ask).\n" +
			"--order shows one order's decisions.",
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var id *market.OrderID
			if order != "" {
				o, err := market.ParseOrderID(order)
				if err != nil {
					return usageError("--order %q: %w (want OWNER/DSEQ/GSEQ/OSEQ)", order, err)
				}
				id = &o
			}
			if limit < 0 {
				return usageError("--limit %d: want 0 (the gateway's default) or more", limit)
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				addr, gc, err := g.providerGateway(ctx, f, s, args)
				if err != nil {
					return err
				}
				raw, err := gc.Decisions(ctx, id, limit)
				if err != nil {
					return err
				}
				var d rest.Decisions
				if err := json.Unmarshal(raw, &d); err != nil {
					return fmt.Errorf("provider %s decisions: %w", addr, err)
				}
				return printList(s, d.Decisions, []string{"TIME", "ORDER", "RESULT", "REASON", "PRICE", "DETAIL"}, func(x *bidengine.Decision) []string {
					price := "-"
					if x.Price != nil {
						price = x.Price.Short()
					}
					return []string{x.Time.UTC().Format(time.RFC3339), x.Order.String(), x.Result, x.Reason, price, x.Detail}
				})
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&order, "order", "", "one order's decisions (OWNER/DSEQ/GSEQ/OSEQ)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (default: the gateway's, 100)")
	return cmd
}

func newProviderRegisterCommand(f *ledgerFlags) *cobra.Command {
	var hostURI, attrFile, email, website string
	cmd := &cobra.Command{
		Use:   "register --host-uri https://HOST:8443 [--attributes-file FILE]",
		Short: "Register the provider on the ledger, or update its registration",
		Long: "register records the provider's gateway address and attributes on the ledger (a new\n" +
			"registration, or an update of an existing one). The attributes file is YAML or JSON:\n" +
			"a provider.yaml with an attributes list, or the list alone:\n\n" +
			"  attributes:\n    - key: region\n      value: us-west\n",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if hostURI == "" {
				return usageError("--host-uri is required")
			}
			var attrs market.Attributes
			if attrFile != "" {
				b, err := os.ReadFile(attrFile)
				if err != nil {
					return err
				}
				if attrs, err = provider.ParseAttributes(b); err != nil {
					return fmt.Errorf("%s: %w", attrFile, err)
				}
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				m := ledger.MsgCreateProvider{Owner: s.key.Address, HostURI: hostURI, Attributes: attrs, Info: ledger.ProviderInfo{EMail: email, Website: website}}
				var existing ledger.Provider
				err := ledger.QueryProvider.Into(ctx, s.c, ledger.ProviderRequest{Owner: s.key.Address}, &existing)
				var msg ledger.Msg = &m
				what := "register provider"
				switch {
				case err == nil:
					u := ledger.MsgUpdateProvider(m)
					msg, what = &u, "update provider"
				case !errors.Is(err, ledger.ErrNotFound):
					return err
				}
				res, err := s.br.Broadcast(ctx, msg)
				if err != nil {
					return fmt.Errorf("%s %s: %w", what, s.key.Address, err)
				}
				return s.report(what, res)
			})
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&hostURI, "host-uri", "", "the provider gateway's address, https://HOST[:PORT]")
	fl.StringVar(&attrFile, "attributes-file", "", "YAML or JSON file of attributes")
	fl.StringVar(&email, "email", "", "contact e-mail")
	fl.StringVar(&website, "website", "", "web site")
	return cmd
}

func newProviderLeasesCommand(f *ledgerFlags) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List the provider's leases with what they have accrued",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return f.with(cmd, false, func(ctx context.Context, s *session) error {
				all, err := providerLeases(ctx, s, state)
				if err != nil {
					return err
				}
				return printLeases(s, all)
			})
		}),
	}
	cmd.Flags().StringVar(&state, "state", "", "only leases in this state (active, insufficient_funds, closed)")
	return cmd
}

func providerLeases(ctx context.Context, s *session, state string) ([]ledger.LeaseResponse, error) {
	return leases(ctx, s, ledger.LeasesRequest{Provider: s.key.Address, State: state})
}

func newProviderWithdrawCommand(f *ledgerFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "withdraw",
		Short: "Withdraw what every active lease has accrued, in as few transactions as the ledger allows",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				leases, err := providerLeases(ctx, s, ledger.LeaseActive)
				if err != nil {
					return err
				}
				if len(leases) == 0 {
					return writeString(s.out, "no active leases\n")
				}
				per := int(s.c.Params().MaxMsgsPerTx)
				for start := 0; start < len(leases); start += per {
					var msgs []ledger.Msg
					for i := start; i < min(start+per, len(leases)); i++ {
						msgs = append(msgs, &ledger.MsgWithdrawLease{ID: leases[i].Lease.ID})
					}
					res, err := s.br.Broadcast(ctx, msgs...)
					if err == nil {
						if err := s.report(fmt.Sprintf("withdraw from %d lease(s)", len(msgs)), res); err != nil {
							return err
						}
						continue
					}
					// A lease may have closed since the list was read (and was paid
					// then): its message fails the whole transaction. Withdraw one by one.
					if !errors.Is(err, ledger.ErrInvalidState) || len(msgs) == 1 {
						return fmt.Errorf("withdraw: %w", err)
					}
					if err := withdrawEach(ctx, s, msgs); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}
}

func newProviderBidCommand(f *ledgerFlags) *cobra.Command {
	var price, deposit string
	cmd := &cobra.Command{
		Use:   "bid OWNER/DSEQ/GSEQ/OSEQ --price AMOUNT",
		Short: "Bid on an order by hand (the provider daemon's bid engine does this automatically)",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			oid, err := market.ParseOrderID(args[0])
			if err != nil {
				return usageError("%w", err)
			}
			p, err := market.ParseDecCoin(price)
			if err != nil {
				return usageError("--price: %w", err)
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				dep := s.c.Params().BidMinDeposit
				if deposit != "" {
					if dep, err = market.ParseCoin(deposit); err != nil {
						return usageError("--deposit: %w", err)
					}
				}
				var o ledger.Order
				if err := ledger.QueryOrder.Into(ctx, s.c, ledger.OrderRequest{ID: oid}, &o); err != nil {
					return fmt.Errorf("order %s: %w", oid, err)
				}
				offer := make([]ledger.ResourceOffer, 0, len(o.Spec.Resources))
				for i := range o.Spec.Resources {
					offer = append(offer, ledger.ResourceOffer{Resources: o.Spec.Resources[i].Resources, Count: o.Spec.Resources[i].Count})
				}
				res, err := s.br.Broadcast(ctx, &ledger.MsgCreateBid{OrderID: oid, Provider: s.key.Address, Price: p, Deposit: dep, ResourcesOffer: offer})
				if err != nil {
					return fmt.Errorf("bid on %s: %w", oid, err)
				}
				return s.report("bid", res)
			})
		}),
	}
	cmd.Flags().StringVar(&price, "price", "", "price per block, like 1000uakt or 0.5uakt (required)")
	cmd.Flags().StringVar(&deposit, "deposit", "", "bid deposit (default: the ledger's minimum)")
	_ = cmd.MarkFlagRequired("price")
	return cmd
}

func newProviderCloseBidCommand(f *ledgerFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "close-bid OWNER/DSEQ/GSEQ/OSEQ",
		Short: "Withdraw a bid; on a won bid this closes the lease (the tenant's group is paused)",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			oid, err := market.ParseOrderID(args[0])
			if err != nil {
				return usageError("%w", err)
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				bid := oid.Bid(s.key.Address)
				res, err := s.br.Broadcast(ctx, &ledger.MsgCloseBid{ID: bid, Reason: reason})
				if err != nil {
					return fmt.Errorf("close bid %s: %w", bid, err)
				}
				return s.report("close bid", res)
			})
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "for a won bid: unstable, decommission, unspecified or manifest_timeout")
	return cmd
}

// withdrawEach withdraws lease by lease, skipping leases that closed meanwhile.
func withdrawEach(ctx context.Context, s *session, msgs []ledger.Msg) error {
	for _, m := range msgs {
		res, err := s.br.Broadcast(ctx, m)
		if errors.Is(err, ledger.ErrInvalidState) {
			if werr := writeString(s.out, fmt.Sprintf("skipped: %v\n", err)); werr != nil {
				return werr
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("withdraw: %w", err)
		}
		if err := s.report("withdraw", res); err != nil {
			return err
		}
	}
	return nil
}
