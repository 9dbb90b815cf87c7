package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCertificateSaveLoad(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCertificate("akash1provider", []string{"provider.example.com", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Save(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	got, err := LoadCertificate(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	x, err := got.X509()
	if err != nil || x.Subject.CommonName != "akash1provider" || len(x.DNSNames) != 1 || len(x.IPAddresses) != 1 || !bytes.Equal(got.PubKey, c.PubKey) {
		t.Fatalf("loaded %+v %v", x, err)
	}
	if _, err := LoadCertificate(filepath.Join(dir, CertFile), filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key loaded")
	}
}

// TestReloader: the files are served, a renewed pair is picked up without a restart,
// and a broken one keeps the last good certificate.
func TestReloader(t *testing.T) {
	dir := t.TempDir()
	write := func(owner string) {
		t.Helper()
		c, err := NewCertificate(owner, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Save(dir); err != nil {
			t.Fatal(err)
		}
	}
	write("akash1first")
	r, err := NewReloader(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		tc, err := r.GetCertificate(nil)
		if err != nil || tc.Leaf == nil {
			t.Fatalf("certificate: %v", err)
		}
		return tc.Leaf.Subject.CommonName
	}
	if cn() != "akash1first" {
		t.Fatal("not the files' certificate")
	}
	// Renewed: a later modification time (set explicitly, so the test does not wait on
	// the file system's clock).
	write("akash1second")
	later := time.Now().Add(time.Minute)
	for _, f := range []string{CertFile, KeyFile} {
		if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	r.checked = time.Time{} // the next handshake checks the files
	r.mu.Unlock()
	if cn() != "akash1second" || r.Err() != nil {
		t.Fatalf("after renewal: %s %v", cn(), r.Err())
	}
	// Broken: the last good certificate stays, the error is reported.
	if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	even := later.Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, CertFile), even, even); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.checked = time.Time{}
	r.mu.Unlock()
	if cn() != "akash1second" || r.Err() == nil {
		t.Fatalf("after a broken write: %s %v", cn(), r.Err())
	}
}
