package auth

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSaveKeepsThePair: a save that fails part way leaves the pair it was replacing,
// never the new key beside the old certificate.
func TestSaveKeepsThePair(t *testing.T) {
	dir := t.TempDir()
	old, err := NewCertificate("akash1tenant", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Save(dir); err != nil {
		t.Fatal(err)
	}
	// The certificate cannot be written aside: its temporary name is a directory that
	// is not empty.
	blocker := filepath.Join(dir, CertFile+".tmp")
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	next, err := NewCertificate("akash1tenant", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Save(dir); err == nil {
		t.Fatal("save through a blocked file: no error")
	}
	got, err := LoadCertificate(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatalf("the kept pair no longer loads: %v", err)
	}
	if !bytes.Equal(got.Cert, old.Cert) || !bytes.Equal(got.Key, old.Key) {
		t.Fatal("the kept pair changed")
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("the new key was left aside: %v", err)
	}
	if err := (Certificate{Cert: old.Cert}).Save(t.TempDir()); err == nil {
		t.Fatal("a certificate without its key was saved")
	}
}
