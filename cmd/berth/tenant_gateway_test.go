package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

// gatewayTestbed is what the CLI's gateway tests start from: the shared cluster with a
// node of their own (named node), a ledger, and the web SDL written to dir/deploy.yaml.
func gatewayTestbed(t *testing.T, node string) (k *testenv.Kube, l *testenv.LedgerNode, dir, sdlFile string) {
	t.Helper()
	k = testenv.Cluster(t)
	if err := k.AddNodes(t.Context(), localenv.NodeSpec{Name: node, CPU: "8", Memory: "32Gi"}); err != nil {
		t.Fatal(err)
	}
	l = testenv.Ledger(t, testenv.LedgerOptions{})
	dir = t.TempDir()
	sdlFile = filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(sdlFile, fixture.WebSDL, 0o600); err != nil {
		t.Fatal(err)
	}
	return k, l, dir, sdlFile
}

// TestTenantGatewayCommands drives a lease through the tenant CLI against a running
// provider: client certificate, manifest, status, revocation.
func TestTenantGatewayCommands(t *testing.T) {
	k, l, dir, sdlFile := gatewayTestbed(t, "cli-gw-1")
	otherSDL := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(otherSDL, []byte(strings.Replace(string(fixture.WebSDL), "nginx", "nginx:1.27", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cli, must := cliWith(t, "--home", l.Home(), "--node", l.RPC())
	attrFile := filepath.Join(dir, "attributes.yaml")
	if err := os.WriteFile(attrFile, []byte("attributes:\n  - key: region\n    value: us-west\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must("provider", "register", "--host-uri", "https://127.0.0.1:1", "--attributes-file", attrFile)

	// The provider, in this process, with its gateway on a free loopback port.
	p := runProvider(t, l, k, dir, "")
	must("provider", "register", "--host-uri", "https://"+p.Gateway(), "--attributes-file", attrFile)
	providerReady(t, p)
	provider := l.Address(t, "provider")

	// The tenant's certificate, a deployment, a lease.
	out := must("tenant", "cert", "create")
	if !strings.Contains(out, "registered in block") {
		t.Fatalf("cert create: %s", out)
	}
	serial := strings.Fields(out)[1]
	if out, err := cli("tenant", "cert", "create"); exitCode(err) != 2 || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("second cert create: %v %s", err, out)
	}
	must("tenant", "deployment", "create", sdlFile, "--dseq", "5")
	testenv.Eventually(t, 30*time.Second, "the provider's bid", func() bool {
		out, err := cli("tenant", "bids", "5")
		return err == nil && strings.Contains(out, provider)
	})
	must("tenant", "lease", "create", "5/1/1", "--provider", provider)

	// A manifest that is not the deployment's is refused before anything is sent.
	if _, err := cli("tenant", "send-manifest", otherSDL, "5"); exitCode(err) != 1 || !strings.Contains(err.Error(), "is not the file deployment 5") {
		t.Fatalf("send-manifest with another file: %v", err)
	}
	out = must("tenant", "send-manifest", sdlFile, "5")
	if !strings.Contains(out, "manifest sent to "+provider) {
		t.Fatalf("send-manifest: %s", out)
	}
	testenv.Eventually(t, 60*time.Second, "the lease ready", func() bool {
		out, err := cli("tenant", "lease", "status", "5")
		return err == nil && strings.Contains(out, "ready (deployed)") && strings.Contains(out, "2/2 available")
	})
	var st api.LeaseStatus
	if err := json.Unmarshal([]byte(must("tenant", "lease", "status", "5/1/1", "--provider", provider, "-o", "json", "--auth", "token")), &st); err != nil || !st.Berth.Ready {
		t.Fatalf("status with a token: %+v %v", st, err)
	}

	// Logs, events and a shell, through the provider's gateway and the API server.
	marker := fmt.Sprintf("cli-gateway-marker-%d", time.Now().UnixNano())
	k.AppendContainerLog(t, marker)
	testenv.Eventually(t, 30*time.Second, "the marker in the lease's logs", func() bool {
		out, err := cli("tenant", "lease", "logs", "5", "--service", "web", "--tail", "50")
		return err == nil && strings.Contains(out, "] "+marker)
	})
	testenv.Eventually(t, 30*time.Second, "the lease's events", func() bool {
		out, err := cli("tenant", "lease", "events", "5")
		return err == nil && strings.Contains(out, "pod/web-")
	})
	shell := func(flags []string, command ...string) (string, error) {
		t.Helper()
		return cli(slices.Concat([]string{"tenant", "lease", "shell", "5"}, flags, []string{"--"}, command)...)
	}
	if out, err := shell([]string{"--service", "web"}, "echo", "hello from the shell"); err != nil || out != "hello from the shell\n" {
		t.Fatalf("shell: %q %v", out, err)
	}
	// A failed shell says why on stderr and exits non-zero: with the command's exit code
	// when it ran.
	failed := func(flags []string, command []string, code int, says string) string {
		t.Helper()
		out, err := shell(flags, command...)
		var stderr strings.Builder
		if got := exitStatus(&stderr, err); got != code || !strings.Contains(stderr.String(), says) {
			t.Fatalf("shell %q: exit %d, stderr %q (output %q), want exit %d saying %q", command, got, stderr.String(), out, code, says)
		}
		return out
	}
	failed([]string{"--service", "web"}, []string{"sh", "-c", "exit 3"}, 3, "berth: command terminated with exit code 3\n")
	// With a terminal and no stdin (kwok v0.8.0's exec panicked on it, which ended the
	// cluster's nodes while the shell exited 0).
	if out := failed([]string{"--service", "web", "-t"}, []string{"sh", "-c", "[ -t 0 ] && [ -t 1 ] && echo in a terminal; exit 4"}, 4, "exit code 4"); out != "in a terminal\r\n" {
		t.Fatalf("shell -t: output %q", out)
	}
	if out, err := shell([]string{"--service", "web", "-t"}, "echo", "hello"); err != nil || out != "hello\r\n" {
		t.Fatalf("shell -t: %q %v", out, err)
	}
	failed([]string{"--service", "web"}, []string{"berth-no-such-command"}, 1, "command could not be executed because it does not exist")
	if _, err := shell([]string{"--service", "web", "--pod-index", "7"}, "true"); err == nil || !strings.Contains(err.Error(), "index") {
		t.Fatalf("shell on a pod that does not exist: %v", err)
	}
	if _, err := shell([]string{"--service", "db"}, "true"); exitCode(err) != 1 || !strings.Contains(err.Error(), "404") {
		t.Fatalf("shell in an unknown service: %v", err)
	}
	// A command the container does not have: Akash's answer, and exit 1.
	if _, err := shell([]string{"--service", "web"}, "berth-no-such-command"); exitCode(err) != 1 ||
		!strings.Contains(err.Error(), "command could not be executed because it does not exist") {
		t.Fatalf("shell with an unknown command: %v (exit %d)", err, exitCode(err))
	}

	// A pod whose log cannot be read (its container never starts): the other pods'
	// lines, then the provider's reason and exit 1, not a quiet end.
	lease := market.LeaseID{Owner: l.Address(t, "tenant"), DSeq: 5, GSeq: 1, OSeq: 1, Provider: provider}
	zero := int64(0)
	pending, err := k.Clientset(t).CoreV1().Pods(kube.LeaseNamespace(lease)).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-never-starts", Labels: map[string]string{ownership.LabelManaged: "true", kube.LabelService: "web"}},
		Spec:       corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "web", Image: "example.invalid/never:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err = cli("tenant", "lease", "logs", "5", "--service", "web", "--tail", "50")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "log could not be read") || !strings.Contains(out, "] "+marker) {
		t.Fatalf("logs with a pod that never started: %v (exit %d)\n%s", err, exitCode(err), out)
	}
	if err := k.Clientset(t).CoreV1().Pods(pending.Namespace).Delete(t.Context(), pending.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	// Once the certificate is revoked, the provider refuses it (within its cache time);
	// a token still works.
	must("tenant", "cert", "revoke", serial)
	testenv.Eventually(t, 20*time.Second, "the revoked certificate refused", func() bool {
		_, err := cli("tenant", "lease", "status", "5", "--auth", "cert")
		return err != nil && strings.Contains(err.Error(), "401") && strings.Contains(err.Error(), "revoked")
	})
	must("tenant", "lease", "status", "5", "--auth", "token")
	if _, err := cli("tenant", "lease", "status", "6"); exitCode(err) != 1 || !strings.Contains(err.Error(), "no active lease") {
		t.Fatalf("status of no lease: %v", err)
	}
	must("tenant", "deployment", "close", "5")
}

// runProvider runs a provider in this process, as the ledger's "provider" account,
// with its gateway (and gRPC) on free loopback ports and gatewayExtra added to the
// gateway's settings (", key: value..."); it stops when the test ends.
func runProvider(t *testing.T, l *testenv.LedgerNode, k *testenv.Kube, dir, gatewayExtra string) *app.Provider {
	t.Helper()
	cfgFile := filepath.Join(dir, "provider.yaml")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, "home: %s\nnode: %s\nkubeconfig: %s\ngateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"%s}\n",
		l.KeyHome(t, "provider"), l.RPC(), k.Kubeconfig(t), gatewayExtra), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadProviderConfig(cfgFile, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	checked, err := cfg.Check()
	if err != nil {
		t.Fatal(err)
	}
	p, err := app.NewProvider(t.Context(), checked, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			t.Errorf("provider: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return p
}

// providerReady waits until p takes manifests and bids.
func providerReady(t *testing.T, p *app.Provider) {
	t.Helper()
	select {
	case <-p.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("provider not ready")
	}
}
