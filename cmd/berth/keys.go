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
	f := &keysFlags{}
	cmd := &cobra.Command{
		Use:     "keys",
		Short:   "Manage account keys in the home's keyring (HOME/keyring, files readable only by you)",
		GroupID: groupTools,
		Long: "keys manages the account keys berth signs transactions with. Each key is a file in\n" +
			"HOME/keyring (mode 0600, not encrypted: guard it like an SSH key). Private keys are\n" +
			"printed only by `keys export`.",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.home, "home", defaultHome(), "berth home whose keyring to use")
	pf.StringVar(&f.prefix, "address-prefix", ledger.DefaultAddressPrefix, "bech32 prefix of addresses")
	pf.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if f.output != "text" && f.output != "json" {
			return usageError("--output %q: want text or json", f.output)
		}
		return nil
	}
	var keyType string
	add := f.command("add NAME", "Create a new key", 1, func(cmd *cobra.Command, kr *keys.Keyring, args []string) error {
		info, err := kr.Add(args[0], keyType)
		if err != nil {
			return err
		}
		return f.show(cmd.OutOrStdout(), info)
	})
	add.Flags().StringVar(&keyType, "type", ledger.KeySecp256k1, "key type: secp256k1 or ed25519")
	list := f.command("list", "List the keys", 0, func(cmd *cobra.Command, kr *keys.Keyring, _ []string) error {
		infos, err := kr.List()
		if err != nil {
			return err
		}
		return f.show(cmd.OutOrStdout(), infos...)
	})
	var addrOnly bool
	show := f.command("show NAME", "Show a key's address and public key", 1, func(cmd *cobra.Command, kr *keys.Keyring, args []string) error {
		info, err := kr.Show(args[0])
		if err != nil {
			return err
		}
		if addrOnly {
			return writeString(cmd.OutOrStdout(), info.Address+"\n")
		}
		return f.show(cmd.OutOrStdout(), info)
	})
	show.Flags().BoolVarP(&addrOnly, "address", "a", false, "print only the address")
	export := f.command("export NAME", "Print a key, private part included (whoever has it controls the account)", 1,
		func(cmd *cobra.Command, kr *keys.Keyring, args []string) error {
			b, err := kr.Export(args[0])
			if err != nil {
				return err
			}
			if err := writeString(cmd.ErrOrStderr(), "warning: this is the private key; keep it secret\n"); err != nil {
				return err
			}
			return writeString(cmd.OutOrStdout(), string(b)+"\n")
		})
	importCmd := f.command("import NAME FILE", "Add a key written by keys export (FILE - reads standard input)", 2,
		func(cmd *cobra.Command, kr *keys.Keyring, args []string) error {
			var b []byte
			var err error
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
			return f.show(cmd.OutOrStdout(), info)
		})
	cmd.AddCommand(add, list, show, export, importCmd)
	return cmd
}

// keysFlags are the keys commands' persistent flags.
type keysFlags struct{ home, prefix, output string }

// command is a keys subcommand taking nargs arguments whose run gets the keyring.
func (f *keysFlags) command(use, short string, nargs int, run func(cmd *cobra.Command, kr *keys.Keyring, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: exactArgs(nargs),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			kr, err := keys.Open(node.KeyringDir(f.home), f.prefix)
			if err != nil {
				return err
			}
			return run(cmd, kr, args)
		}),
	}
}

// show prints keys as --output asks: a table, or JSON (one key as an object).
func (f *keysFlags) show(w io.Writer, infos ...keys.Info) error {
	switch f.output {
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
	return usageError("--output %q: want text or json", f.output)
}
