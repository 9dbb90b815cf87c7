package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/sdl"
)

func newSDLCommand() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:     "sdl",
		Short:   "Read SDL deployment files (v2.0, v2.1) exactly as Akash does",
		GroupID: groupTools,
		Long: "sdl reads a tenant's SDL file (\"-\" reads standard input) and checks it, or prints what\n" +
			"the ledger records (groups), what the provider receives (manifest), or the manifest's\n" +
			"version hash. Keys Akash silently ignores are reported as warnings on standard error;\n" +
			"--strict makes them errors.\n\n" +
			"Exit status: 0 valid, 1 invalid (the error names the field path and line), 2 usage.",
	}
	cmd.PersistentFlags().BoolVar(&strict, "strict", false, "treat warnings (such as ignored keys) as errors")
	sub := func(use, short string, show func(w io.Writer, name string, r *sdl.Result) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " FILE",
			Short: short,
			Args:  exactArgs(1),
			RunE: runE(func(cmd *cobra.Command, args []string) error {
				r, err := readSDL(cmd, args[0], strict)
				if err != nil {
					return err
				}
				return show(cmd.OutOrStdout(), args[0], r)
			}),
		}
	}
	cmd.AddCommand(
		sub("validate", "Check an SDL file and summarise it", func(w io.Writer, name string, r *sdl.Result) error {
			services := 0
			for _, g := range r.Manifest {
				services += len(g.Services)
			}
			_, err := fmt.Fprintf(w, "%s: valid SDL %s: %d group(s), %d service(s), version %s\n",
				displayName(name), r.SDLVersion, len(r.Groups), services, hex.EncodeToString(r.Version))
			return err
		}),
		sub("groups", "Print the deployment groups the ledger records (JSON)", func(w io.Writer, _ string, r *sdl.Result) error {
			return writeJSON(w, r.Groups)
		}),
		sub("manifest", "Print the manifest the provider receives (JSON)", func(w io.Writer, _ string, r *sdl.Result) error {
			return writeJSON(w, r.Manifest)
		}),
		sub("version", "Print the manifest version (hex sha256) the deployment records", func(w io.Writer, _ string, r *sdl.Result) error {
			_, err := fmt.Fprintln(w, hex.EncodeToString(r.Version))
			return err
		}),
	)
	return cmd
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("expected %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs as a usage error.
func minArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError("expected at least %d arguments, got %d", n, len(args))
		}
		return nil
	}
}

func displayName(name string) string {
	if name == "-" {
		return "<stdin>"
	}
	return name
}

// readSDL reads and parses the file ("-": standard input), printing warnings to stderr.
func readSDL(cmd *cobra.Command, name string, strict bool) (*sdl.Result, error) {
	in := cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		in = f
	}
	// One byte past the limit, so that Parse reports an oversized file as such.
	data, err := io.ReadAll(io.LimitReader(in, sdl.MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", displayName(name), err)
	}
	r, warnings, err := sdl.Parse(data, sdl.Options{Strict: strict})
	for _, w := range warnings {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", displayName(name), w)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", displayName(name), err)
	}
	return r, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
