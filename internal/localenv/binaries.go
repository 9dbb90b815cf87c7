package localenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable holding the directory with the control-plane
// binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and
// kwok's stage files, as produced by hack/testbin.sh. `make test` sets it.
const BinDirEnv = "BERTH_TESTBIN"

// ErrMissingDependency marks a dependency (binary, package) that is not installed; tests
// skip on it locally and fail under CI.
var ErrMissingDependency = errors.New("missing dependency")

var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// FindBinaries returns the directory holding the control-plane binaries: $BERTH_TESTBIN
// when set, otherwise the cache directory hack/testbin.sh reports for the source tree
// containing the working directory (without building anything).
func FindBinaries(ctx context.Context) (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		script, err := findHackScript("testbin.sh")
		if err != nil {
			return "", err
		}
		var stderr bytes.Buffer
		//nolint:gosec // G204: the script is berth's own hack/testbin.sh found in the source tree
		cmd := exec.CommandContext(ctx, "bash", script, "--print")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%w: Kubernetes test binaries are not built (%s); run `make testbin` or hack/testbin.sh",
				ErrMissingDependency, strings.TrimSpace(stderr.String()))
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range controlPlaneBinaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w: %s not found in %s (%s); run `make testbin` or hack/testbin.sh",
				ErrMissingDependency, b, dir, BinDirEnv)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kwok-stages")); err != nil {
		return "", fmt.Errorf("%w: kwok stages not found in %s; run hack/testbin.sh", ErrMissingDependency, dir)
	}
	return dir, nil
}

// findBuilt returns the directory a hack/ build script fills: $env when set, otherwise
// the cache directory `hack/script --print` reports for the source tree containing the
// working directory (without building anything). Each of files (paths relative to the
// directory) must exist in it; what is missing is an ErrMissingDependency naming the
// script to run.
func findBuilt(ctx context.Context, env, script string, files ...string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		path, err := findHackScript(script)
		if err != nil {
			return "", err
		}
		var stderr bytes.Buffer
		//nolint:gosec // G204: the script is one of berth's own hack/ scripts found in the source tree
		cmd := exec.CommandContext(ctx, "bash", path, "--print")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			why := strings.TrimSpace(stderr.String())
			if why == "" {
				why = fmt.Sprintf("hack/%s --print: %v; run hack/%s", script, err, script)
			}
			return "", fmt.Errorf("%w: %s", ErrMissingDependency, why)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%w: %s not found in %s (%s); run hack/%s",
				ErrMissingDependency, f, dir, env, script)
		}
	}
	return dir, nil
}

// findHackScript walks up from the working directory to the berth source tree and
// returns the path of its script hack/name.
func findHackScript(name string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		script := filepath.Join(dir, "hack", name)
		if _, err := os.Stat(script); err == nil {
			return script, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: no berth source tree (hack/%s) above %s", ErrMissingDependency, name, wd)
		}
	}
}

// BuildBinaries builds (or reuses) the control-plane binaries with hack/testbin.sh from
// the berth source tree containing the working directory, writing the script's progress
// to progress, and returns their directory as FindBinaries finds and checks it (so
// $BERTH_TESTBIN must be unset). It takes about ten minutes the first time.
func BuildBinaries(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "testbin.sh", "the Kubernetes binaries", progress); err != nil {
		return "", err
	}
	return FindBinaries(ctx)
}

// runHackScript runs berth's hack/name, which builds what (its progress to progress).
func runHackScript(ctx context.Context, name, what string, progress io.Writer) error {
	script, err := findHackScript(name)
	if err != nil {
		return err
	}
	//nolint:gosec // G204: the script is one of berth's own in hack/, found in the source tree
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s (hack/%s): %w", what, name, err)
	}
	return nil
}
