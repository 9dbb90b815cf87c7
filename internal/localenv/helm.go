package localenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// HelmEnv names the environment variable holding the helm binary's path.
const HelmEnv = "BERTH_HELM"

// FindHelm returns the helm binary: $BERTH_HELM when set, else the one hack/tool.sh
// installs from the Go module proxy in the berth source tree containing the working
// directory (built the first time, its progress to progress), else helm on the PATH.
// None is an ErrMissingDependency.
func FindHelm(ctx context.Context, progress io.Writer) (string, error) {
	if p := os.Getenv(HelmEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrMissingDependency, HelmEnv, p, err)
		}
		return p, nil
	}
	if script, err := findHackScript("tool.sh"); err == nil {
		//nolint:gosec // G204: berth's own hack/tool.sh, found in the source tree
		cmd := exec.CommandContext(ctx, "bash", script, "helm")
		cmd.Stderr = progress
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("build helm (hack/tool.sh helm): %w", err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		return "", fmt.Errorf("%w: helm: not on the PATH, no berth source tree to build it in, and %s unset", ErrMissingDependency, HelmEnv)
	}
	return p, nil
}
