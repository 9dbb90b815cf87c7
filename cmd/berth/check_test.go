package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: --check validates the settings as run would read them and connects to
// nothing — the example files of config/ are valid; a wrong key exits 2 naming it.
func TestCheck(t *testing.T) {
	for _, args := range [][]string{
		{"provider", "run", "--config", "../../config/deploy/provider.yaml", "--check"},
		{"operator", "hostname", "--config", "../../config/operators/hostname/hostname-operator.yaml", "--check"},
		{"operator", "ip", "--config", "../../config/operators/ip/ip-operator.yaml", "--check"},
		{"operator", "inventory", "--config", "../../config/operators/inventory/inventory-operator.yaml", "--check"},
	} {
		out, err := run(t, args...)
		if err != nil || !strings.HasSuffix(out, ": valid\n") {
			t.Errorf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "provider.yaml")
	if err := os.WriteFile(bad, []byte("home: /tmp/h\nbidding: {timeout: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "provider", "run", "--config", bad, "--check")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "bidding.timeout 1s") || strings.Contains(out, "valid") {
		t.Fatalf("a wrong key: exit %d, %v\n%s", exitCode(err), err, out)
	}
	// A value that is not one of its key's kind is refused as the file is read.
	if err := os.WriteFile(bad, []byte("home: /tmp/h\nbidding:\n  limits: {memory_per_replica: lots}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "provider", "run", "--config", bad, "--check"); exitCode(err) != 2 || !strings.Contains(err.Error(), `line 3: bidding.limits.memory_per_replica: "lots" is not a size`) {
		t.Fatalf("a size that is none: exit %d, %v", exitCode(err), err)
	}
	// A flag is checked as run would take it.
	if _, err := run(t, "provider", "run", "--config", "../../config/deploy/provider.yaml", "--log-level", "loud", "--check"); exitCode(err) != 2 {
		t.Fatalf("--log-level loud: %v", err)
	}
	if err := os.WriteFile(bad, []byte("heartbeat: 0s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "operator", "inventory", "--config", bad, "--check"); exitCode(err) != 2 || !strings.Contains(err.Error(), "heartbeat") {
		t.Fatalf("operator: %v", err)
	}
	// Without --check, the operator refuses it as it is built, before it connects.
	if _, err := run(t, "operator", "inventory", "--config", bad); exitCode(err) != 2 || !strings.Contains(err.Error(), "heartbeat") {
		t.Fatalf("operator run: %v", err)
	}
}
