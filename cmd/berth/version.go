package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time by the Makefile (-X main.version=… -X main.commit=…).
var (
	version = "dev"
	commit  = ""
)

// buildCommit returns the commit from the linker flag, or from the Go build info when
// the binary was built with VCS stamping.
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print berth's version, commit and Go version",
		GroupID: groupTools,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "berth %s\ncommit: %s\ngo: %s %s/%s\n",
				version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		}),
	}
}
