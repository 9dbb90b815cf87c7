package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := Load(path)
	if err != nil || rc.Host != "https://127.0.0.1:6443" || rc.BearerToken != "secret-token" {
		t.Fatalf("%+v, %v", rc, err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing file: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "not running in a cluster") {
		t.Fatalf("empty outside a cluster: %v", err)
	}
}
