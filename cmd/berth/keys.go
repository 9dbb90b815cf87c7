package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/keys"
	"berth.dev/berth/internal/node"
)

func newKeysCommand() *cobra.Command {
	var home, prefix, output string
	cmd := &cobra.Command{
		Use:     "keys",
		Short:   "Manage account keys in the home's keyring (HOME/keyring, files readable only by you)",
		GroupID: groupTools,
		Long: "keys manages the account keys berth signs transactions with. Each key is a file in\n" +
			"HOME/keyring (mode 0600, not encrypted: guard it like an SSH key). Private keys are\n" +
			"printed only by `keys export`.",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&home, "home", defaultHome(), "berth home whose keyring to use")
	pf.StringVar(&prefix, "address-prefix", ledger.DefaultAddressPrefix, "bech32 prefix of addresses")
	pf.StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if output != "text" && output != "json" {
			return usageError("--output %q: want text or json", output)
		}
		return nil
	}
	open := func() (*keys.Keyring, error) { return keys.Open(node.KeyringDir(home), prefix) }
	show := func(w io.Writer, infos ...keys.Info) error {
		switch output {
		case "json":
			if len(infos) == 1 {
				return writeJSON(w, infos[0])
			}
			return writeJSON(w, infos)
		case "text":
			rows := make([][]string, 0, len(infos))
			for _, i := range infos {
				rows = append(rows, []string{i.Name, i.Type, i.Address})
			}
			return writeTable(w, []string{"NAME", "TYPE", "ADDRESS"}, rows)
		}
		return usageError("--output %q: want text or json", output)
	}
	var keyType string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a new key",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			kr, err := open()
			if err != nil {
				return err
			}
			info, err := kr.Add(args[0], keyType)
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), info)
		}),
	}
	add.Flags().StringVar(&keyType, "type", ledger.KeySecp256k1, "key type: secp256k1 or ed25519")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			kr, err := open()
			if err != nil {
				return err
			}
			infos, err := kr.List()
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), infos...)
		}),
	}
	var addrOnly bool
	showCmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a key's address and public key",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			kr, err := open()
			if err != nil {
				return err
			}
			info, err := kr.Show(args[0])
			if err != nil {
				return err
			}
			if addrOnly {
				return writeString(cmd.OutOrStdout(), info.Address+"\n")
			}
			return show(cmd.OutOrStdout(), info)
		}),
	}
	showCmd.Flags().BoolVarP(&addrOnly, "address", "a", false, "print only the address")
	export := &cobra.Command{
		Use:   "export NAME",
		Short: "Print a key, private part included (whoever has it controls the account)",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			kr, err := open()
			if err != nil {
				return err
			}
			b, err := kr.Export(args[0])
			if err != nil {
				return err
			}
			if err := writeString(cmd.ErrOrStderr(), "warning: this is the private key; keep it secret\n"); err != nil {
				return err
			}
			return writeString(cmd.OutOrStdout(), string(b)+"\n")
		}),
	}
	importCmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Add a key written by keys export (FILE - reads standard input)",
		Args:  exactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			kr, err := open()
			if err != nil {
				return err
			}
			var b []byte
			if args[1] == "-" {
				b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<16))
			} else {
				b, err = os.ReadFile(args[1])
			}
			if err != nil {
				return err
			}
			info, err := kr.ImportExported(args[0], b)
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), info)
		}),
	}
	cmd.AddCommand(add, list, showCmd, export, importCmd)
	return cmd
}
