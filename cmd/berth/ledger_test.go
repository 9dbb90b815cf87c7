package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/testenv"
)

// TestTenantAndProviderCommands trades end to end through the CLI against an
// in-process ledger node: register, deploy, bid, lease, withdraw, close.
func TestTenantAndProviderCommands(t *testing.T) {
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	dir := t.TempDir()
	sdlFile := filepath.Join(dir, "deploy.yaml")
	attrFile := filepath.Join(dir, "provider.yaml")
	if err := os.WriteFile(sdlFile, fixture.WebSDL, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(attrFile, []byte("attributes:\n  - key: region\n    value: us-west\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := ledgerCLI(t, l)
	tenant, provider := l.Address(t, "tenant"), l.Address(t, "provider")

	out := cli("provider", "register", "--host-uri", "https://provider.example.com:8443", "--attributes-file", attrFile)
	if !strings.Contains(out, "provider.created") {
		t.Fatalf("register: %s", out)
	}
	out = cli("provider", "register", "--host-uri", "https://provider.example.com:8443", "--attributes-file", attrFile, "--email", "ops@example.com")
	if !strings.Contains(out, "provider.updated") {
		t.Fatalf("re-register: %s", out)
	}
	out = cli("tenant", "deployment", "create", sdlFile, "--dseq", "77")
	if !strings.Contains(out, "order.created owner="+tenant+" dseq=77 gseq=1 oseq=1") {
		t.Fatalf("create: %s", out)
	}
	cli("provider", "bid", tenant+"/77/1/1", "--price", "900uakt")
	out = cli("tenant", "bids", "77")
	if !strings.Contains(out, provider) || !strings.Contains(out, "900.000000000000000000uakt") || !strings.Contains(out, "open") {
		t.Fatalf("bids table: %s", out)
	}
	out = cli("tenant", "lease", "create", "77/1/1", "--provider", provider)
	if !strings.Contains(out, "lease.created") {
		t.Fatalf("lease create: %s", out)
	}
	var leases []ledger.LeaseResponse
	if err := json.Unmarshal([]byte(cli("tenant", "leases", "-o", "json")), &leases); err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].Lease.State != ledger.LeaseActive || leases[0].Lease.ID.Provider != provider {
		t.Fatalf("leases: %+v", leases)
	}
	out = cli("provider", "withdraw")
	if !strings.Contains(out, "withdrawal") {
		t.Fatalf("withdraw: %s", out)
	}
	out = cli("tenant", "lease", "close", "77/1/1", "--provider", provider)
	if !strings.Contains(out, "lease.closed") || !strings.Contains(out, "reason=owner") {
		t.Fatalf("lease close: %s", out)
	}
	out = cli("tenant", "deployment", "close", "77")
	if !strings.Contains(out, "deployment.closed") {
		t.Fatalf("deployment close: %s", out)
	}

	// Failures: usage errors exit 2, ledger refusals exit 1 with the ledger's reason.
	for _, tt := range []struct {
		args    []string
		code    int
		message string
	}{
		{[]string{"tenant", "lease", "create", "77/1", "--provider", provider}, 2, "want DSEQ/GSEQ/OSEQ"},
		{[]string{"tenant", "lease", "create", "77/1/1"}, 2, "--provider is required"},
		{[]string{"tenant", "deployment", "close", "0"}, 2, "positive number"},
		{[]string{"tenant", "deployment", "close", "77"}, 1, "is closed"},
		{[]string{"tenant", "deployment", "deposit", "77", "5uakt"}, 1, "is closed"},
		{[]string{"tenant", "deployment", "deposit", "77", "five"}, 2, "want an amount"},
		{[]string{"provider", "bid", tenant + "/77/1/1", "--price", "1uakt"}, 1, "order " + tenant + "/77/1/1 is closed"},
		{[]string{"tenant", "bids", "77", "--from", "nobody"}, 1, `key "nobody": no such key`},
		{[]string{"tenant", "leases", "-o", "yaml"}, 2, `--output "yaml"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, append(tt.args, "--home", l.Home(), "--node", l.RPC())...)
			if got := exitCode(err); got != tt.code || err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("exit %d, error %v; want exit %d with %q", got, err, tt.code, tt.message)
			}
		})
	}
}

func TestKeysCommands(t *testing.T) {
	home := t.TempDir()
	out, err := run(t, "keys", "add", "alice", "--home", home, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Name, Type, Address string }
	if err := json.Unmarshal([]byte(out), &info); err != nil || !strings.HasPrefix(info.Address, "akash1") || info.Type != ledger.KeySecp256k1 {
		t.Fatalf("keys add: %s (%v)", out, err)
	}
	if strings.Contains(out, "priv") {
		t.Fatalf("keys add printed the private key: %s", out)
	}
	st, err := os.Stat(filepath.Join(home, "keyring", "alice.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st, err)
	}
	if _, err := run(t, "keys", "add", "alice", "--home", home); exitCode(err) != 1 || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate add: %v", err)
	}
	if _, err := run(t, "keys", "add", "../evil", "--home", home); err == nil || !strings.Contains(err.Error(), "key name") {
		t.Fatalf("bad name: %v", err)
	}
	out, err = run(t, "keys", "show", "alice", "-a", "--home", home)
	if err != nil || strings.TrimSpace(out) != info.Address {
		t.Fatalf("show -a: %q %v", out, err)
	}
	out, err = run(t, "keys", "list", "--home", home)
	if err != nil || !strings.Contains(out, "alice") || strings.Contains(out, "priv") {
		t.Fatalf("list: %q %v", out, err)
	}
	exported, err := run(t, "keys", "export", "alice", "--home", home)
	if err != nil || !strings.Contains(exported, "priv_key") {
		t.Fatalf("export: %v", err)
	}
	// run mixes stderr into the output: keep the JSON object only.
	start := strings.Index(exported, "{")
	if start < 0 {
		t.Fatalf("export printed no JSON: %q", exported)
	}
	exported = exported[start:]
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "k.json"), []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "keys", "import", "alice2", filepath.Join(other, "k.json"), "--home", other)
	if err != nil || !strings.Contains(out, info.Address) {
		t.Fatalf("import: %q %v", out, err)
	}
}
