package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/node"
)

// newBankCommand is berth's counterpart of Akash's `tx bank send` and `query bank
// balances`: moving funds between accounts on any chain berth talks to (to fund a new
// key on the dev chain, for one).
func newBankCommand() *cobra.Command {
	var f ledgerFlags
	cmd := &cobra.Command{
		Use:     "bank",
		Short:   "Send funds between accounts, read an account's balances",
		GroupID: groupTools,
	}
	f.register(cmd.PersistentFlags(), "")
	cmd.AddCommand(newBankSendCommand(&f), newBankBalanceCommand(&f))
	return cmd
}

func newBankSendCommand(f *ledgerFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "send TO AMOUNT[,AMOUNT...] --from KEY",
		Short: "Send coins from the --from key's account to the address TO",
		Long: "send moves coins from the account of the --from key (in --home's keyring) to the\n" +
			"account TO, an address of the chain (`berth keys show NAME -a --home DIR` prints a\n" +
			"key's). AMOUNT is one coin or several separated by commas, each an integer amount\n" +
			"then a denomination: 5000000uakt or 5000000uakt,5000000uact. It prints the block\n" +
			"and the transaction hash once the transfer is in a block.",
		Example: "  berth bank send akash1… 50000000uakt,50000000uact --from provider",
		Args:    exactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if f.from == "" {
				return usageError("--from is required: the name of the key whose account pays")
			}
			amount, err := parseCoins(args[1])
			if err != nil {
				return err
			}
			to := args[0]
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				if err := checkAccountAddress("TO", to, s.c.Params().AddressPrefix); err != nil {
					return err
				}
				res, err := s.br.Broadcast(ctx, &ledger.MsgSend{From: s.key.Address, To: to, Amount: amount})
				if err != nil {
					return fmt.Errorf("send %s from %s (%s) to %s: %w", formatCoins(amount), s.key.Name, s.key.Address, to, err)
				}
				return s.report("send", res)
			})
		}),
	}
}

func newBankBalanceCommand(f *ledgerFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "balance [ADDRESS]",
		Short: "Show an account's balances (default: the --from key's)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.checkOutput(); err != nil {
				return err
			}
			if len(args) == 0 && f.from == "" {
				return usageError("give an ADDRESS, or --from with a key name")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			c, err := chain.Dial(ctx, nodeAddress(f.node, f.home))
			if err != nil {
				return err
			}
			defer c.Close()
			prefix := c.Params().AddressPrefix
			addr := ""
			if len(args) == 1 {
				addr = args[0]
				if err := checkAccountAddress("ADDRESS", addr, prefix); err != nil {
					return err
				}
			} else {
				kr, err := keys.Open(node.KeyringDir(f.home), prefix)
				if err != nil {
					return err
				}
				info, err := kr.Show(f.from)
				if err != nil {
					return err
				}
				addr = info.Address
			}
			var acct ledger.AccountResponse
			// An address that never received anything has no account: it holds nothing.
			err = ledger.QueryAccount.Into(ctx, c, ledger.AccountRequest{Address: addr}, &acct)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("account %s: %w", addr, err)
			}
			if f.output == "json" {
				return writeJSON(cmd.OutOrStdout(), struct {
					Address  string        `json:"address"`
					Balances []market.Coin `json:"balances"`
				}{addr, append([]market.Coin{}, acct.Balances...)})
			}
			bal := formatCoins(acct.Balances)
			if bal == "" {
				bal = "nothing"
			}
			return writeString(cmd.OutOrStdout(), addr+": "+bal+"\n")
		}),
	}
}

// checkAccountAddress refuses what is not an account address of the chain (whose
// addresses start with prefix), saying which argument it was.
func checkAccountAddress(arg, addr, prefix string) error {
	if err := ledger.CheckAddress(addr, prefix); err != nil {
		return usageError("%s %q: not an account address of this chain (%s1…): %w; `berth keys show NAME -a` prints a key's", arg, addr, prefix, err)
	}
	return nil
}

// parseCoins reads AMOUNT[,AMOUNT...]: positive integer amounts, each then a
// denomination, no denomination twice.
func parseCoins(s string) ([]market.Coin, error) {
	var out []market.Coin
	for i, part := range strings.Split(s, ",") {
		c, err := market.ParseCoin(strings.TrimSpace(part))
		if err != nil {
			return nil, usageError("AMOUNT %q: %w", s, err)
		}
		if c.Amount == 0 {
			return nil, usageError("AMOUNT %q: coin %d (%s) is zero", s, i+1, c)
		}
		for _, o := range out {
			if o.Denom == c.Denom {
				return nil, usageError("AMOUNT %q: %s is listed twice", s, c.Denom)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func formatCoins(coins []market.Coin) string {
	parts := make([]string, 0, len(coins))
	for _, c := range coins {
		parts = append(parts, c.String())
	}
	return strings.Join(parts, ",")
}
