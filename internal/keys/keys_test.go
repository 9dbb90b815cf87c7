package keys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/api/ledger/v1"
)

func TestKeyring(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keyring")
	kr, err := Open(dir, ledger.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kr.Add("alice", ledger.KeySecp256k1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Address, "akash1") {
		t.Fatalf("address %s", a.Address)
	}
	if _, err := kr.Add("alice", ledger.KeyEd25519); !errors.Is(err, ErrExists) {
		t.Fatalf("second alice: %v", err)
	}
	b, err := kr.Add("bob", ledger.KeyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "alice.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("alice.json: %v %v", st, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("keyring dir: %v %v", st, err)
	}
	list, err := kr.List()
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[1].Name != "bob" {
		t.Fatalf("list %+v %v", list, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("keyring holds %d files, want 2 (no temporary files left)", len(ents))
	}
	// A key signs for its address.
	priv, err := kr.Signer("bob")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := priv.Sign([]byte("m"))
	if err != nil || !b.PubKey.Verify([]byte("m"), sig) {
		t.Fatalf("signature: %v", err)
	}
	// Export and import elsewhere give the same address.
	exp, err := kr.Export("alice")
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(t.TempDir(), ledger.DefaultAddressPrefix)
	if err != nil {
		t.Fatal(err)
	}
	imp, err := other.ImportExported("alice", exp)
	if err != nil || imp.Address != a.Address {
		t.Fatalf("import: %+v %v", imp, err)
	}
	for _, bad := range []string{"", "../x", ".hidden", strings.Repeat("a", 65), "a/b"} {
		if _, err := kr.Add(bad, ledger.KeySecp256k1); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := kr.Show("carol"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("show missing: %v", err)
	}
	if _, err := other.ImportExported("x", []byte(`{"type":"secp256k1","priv_key":"AAAA"}`)); err == nil {
		t.Fatal("imported a 3-byte key")
	}
}
