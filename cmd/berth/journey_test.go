package main

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

// startDev runs `berth dev` with args in the background until the test ends, and
// returns once it is ready (its banner printed).
func startDev(t *testing.T, args ...string) string {
	t.Helper()
	return startDevLogging(t, slog.New(slog.DiscardHandler), args...)
}

// startDevLogging is startDev with berth's log going to log.
func startDevLogging(t *testing.T, log *slog.Logger, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out := testenv.NewMarkerWriter("Press Ctrl-C")
	root := newRootCommand(log)
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append([]string{"dev"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("berth dev: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Error("berth dev did not stop within 2 minutes of Ctrl-C")
		}
	})
	select {
	case <-out.Seen():
	case err := <-done:
		done <- err
		t.Fatalf("berth dev ended before it was ready: %v\n%s", err, out.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("berth dev not ready within 5 minutes:\n%s", out.String())
	}
	return out.String()
}

// devKube is a client of the cluster of the berth dev running on home.
func devKube(t *testing.T, home string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(home, "cluster", "berth.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestTenantJourney is the capstone: `berth dev` and a tenant's whole journey through
// the CLI and the public APIs (the ledger, the provider's gateway, the Kubernetes
// API): deploy → bid → lease → manifest → pods Running → ready → logs → a shell
// command's output → manifest update → close → namespace gone, and the provider was
// paid exactly what the lease accrued, block for block.
func TestTenantJourney(t *testing.T) {
	t.Parallel() // see TestMain
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	home := filepath.Join(t.TempDir(), "home")
	banner := startDev(t, "--home", home, "--nodes", "2", "--gpu-nodes", "1", "--gpus-per-node", "2", "--withdraw-period", "2s")
	for _, want := range []string{"chain berth-dev (new)", "tenant key", "berth tenant deploy examples/web.yaml"} {
		if !strings.Contains(banner, want) {
			t.Fatalf("banner lacks %q:\n%s", want, banner)
		}
	}
	cli, must := cliWith(t, "--home", home)
	cs := devKube(t, home)
	ctx := t.Context()

	// Deploy: deployment, bid, lease, manifest, until ready.
	sdlFile := filepath.Join("..", "..", "examples", "web.yaml")
	out, progress, err := runSplit(t, "tenant", "deploy", sdlFile, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy: %v\n%s%s", err, progress, out)
	}
	for _, want := range []string{"created in block", "bid on ", "lease ", "manifest sent to", "ready"} {
		if !strings.Contains(progress, want) {
			t.Errorf("deploy progress lacks %q:\n%s", want, progress)
		}
	}
	var res deployResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("deploy output: %v\n%s", err, out)
	}
	if len(res.Leases) != 1 || !res.Leases[0].Status.Berth.Ready {
		t.Fatalf("deploy: want one ready lease, got %+v", res)
	}
	lease := res.Leases[0].ID
	dseq := strconv.FormatUint(res.DSeq, 10)
	// The web service is reached by its accepted hostname and by the provider's own.
	if uris := res.Leases[0].Status.Services["web"].URIs; !slices.Contains(uris, deploy.IngressHost(lease, "web", dev.IngressDomain)) || !slices.Contains(uris, "web.example.test") {
		t.Errorf("web URIs %v, want web.example.test and the provider's hostname", uris)
	}

	// Its pods run on the cluster, in the lease's namespace.
	ns := kube.LeaseNamespace(lease)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: ownership.LabelDSeq + "=" + dseq})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no pods in %s", ns)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s, want Running", p.Name, p.Status.Phase)
		}
	}

	// Its status on the provider says ready.
	var st api.LeaseStatus
	if err := json.Unmarshal([]byte(must("tenant", "lease", "status", dseq, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Berth.Ready || st.Services["web"].ReadyReplicas != st.Services["web"].Total {
		t.Fatalf("lease status not ready: %+v", st)
	}

	// The hostname operator routes both hostnames: an Ingress each, and the lease
	// status says so (routed: berth dev runs no ingress controller to check them).
	providerHost := deploy.IngressHost(lease, "web", dev.IngressDomain)
	testenv.EventuallyNoError(t, time.Minute, "hostnames routed", func() error {
		out, err := cli("tenant", "lease", "status", dseq)
		if err != nil {
			return err
		}
		for _, h := range []string{"web.example.test", providerHost} {
			if !strings.Contains(out, "host "+h+": routed") {
				return fmt.Errorf("lease status does not show %s routed:\n%s", h, out)
			}
		}
		return nil
	})
	// The provider's /status counts them.
	var ps struct {
		Berth struct {
			Hostnames map[string]int `json:"hostnames"`
		} `json:"berth"`
	}
	if err := json.Unmarshal([]byte(must("provider", "status", "--from", "provider")), &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Berth.Hostnames["Routed"] != 2 {
		t.Errorf("/status hostnames %v, want 2 routed", ps.Berth.Hostnames)
	}
	for _, h := range []string{"web.example.test", providerHost} {
		ing, err := cs.NetworkingV1().Ingresses(ns).Get(ctx, h, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Ingress for %s: %v", h, err)
		}
		if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; ing.Spec.Rules[0].Host != h || b.Name != "web" || b.Port.Number != 80 {
			t.Errorf("Ingress %s: host %s, backend %+v", h, ing.Spec.Rules[0].Host, b)
		}
	}

	// A leased IP: berth dev's MetalLB gives the endpoint an address from its TEST-NET-1
	// pool, shown in the lease status as Akash shows it.
	ipFile := filepath.Join(t.TempDir(), "leased-ip.yaml")
	if err := os.WriteFile(ipFile, []byte(leasedIPSDL), 0o600); err != nil {
		t.Fatal(err)
	}
	out, progress, err = runSplit(t, "tenant", "deploy", ipFile, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy with a leased IP: %v\n%s%s", err, progress, out)
	}
	var ipRes deployResult
	if err := json.Unmarshal([]byte(out), &ipRes); err != nil || len(ipRes.Leases) != 1 {
		t.Fatalf("deploy output: %v\n%s", err, out)
	}
	ipDSeq := strconv.FormatUint(ipRes.DSeq, 10)
	// gameIP waits until the lease of dseq shows the game port on an address (want: that
	// one; "": any) and returns it.
	gameIP := func(dseq, want string) string {
		t.Helper()
		var got string
		testenv.EventuallyNoError(t, time.Minute, "the leased IP's address on "+dseq, func() error {
			var st api.LeaseStatus
			out, err := cli("tenant", "lease", "status", dseq, "-o", "json")
			if err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				return err
			}
			ips := st.IPs["game"]
			if len(ips) != 1 || !strings.HasPrefix(ips[0].IP, "192.0.2.") || ips[0].ExternalPort != 25565 || ips[0].Protocol != "TCP" ||
				(want != "" && ips[0].IP != want) {
				return fmt.Errorf("ips %+v, leased_ips %+v", st.IPs, st.Berth.LeasedIPs)
			}
			got = ips[0].IP
			return nil
		})
		return got
	}
	addr := gameIP(ipDSeq, "")
	// The pool is a /24: its network and broadcast addresses are never handed out.
	if a := netip.MustParseAddr(addr).As4(); a[3] == 0 || a[3] == 255 {
		t.Errorf("the leased IP is %s, the pool's network or broadcast address", addr)
	}
	// A second deployment of the tenant names the same endpoint: the first keeps it
	// until the tenant moves it (POST /endpoint/migrate); then the second has it, at
	// the same address.
	out, progress, err = runSplit(t, "tenant", "deploy", ipFile, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("second deploy with the leased IP: %v\n%s%s", err, progress, out)
	}
	var ipRes2 deployResult
	if err := json.Unmarshal([]byte(out), &ipRes2); err != nil || len(ipRes2.Leases) != 1 {
		t.Fatalf("deploy output: %v\n%s", err, out)
	}
	ipDSeq2 := strconv.FormatUint(ipRes2.DSeq, 10)
	if ips := ipRes2.Leases[0].Status.IPs; len(ips) != 0 {
		t.Fatalf("the second deployment has the first's endpoint before it moved: %+v", ips)
	}
	if out := must("tenant", "lease", "migrate-endpoints", ipDSeq2, "game-ip"); !strings.Contains(out, "game-ip") {
		t.Fatalf("migrate-endpoints: %s", out)
	}
	gameIP(ipDSeq2, addr)
	for _, d := range []string{ipDSeq, ipDSeq2} {
		if _, err := cli("tenant", "close", d); err != nil {
			t.Fatal(err)
		}
	}

	// Logs: a line the (simulated) container writes reaches the tenant.
	marker := fmt.Sprintf("journey-log-%d", time.Now().UnixNano())
	logFile := filepath.Join(home, "cluster", "kwok", "containers.log")
	f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), marker); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if logs := must("tenant", "lease", "logs", dseq, "--tail", "5"); !strings.Contains(logs, marker) {
		t.Errorf("logs lack %q:\n%s", marker, logs)
	}

	// A shell command's output.
	if sh := must("tenant", "lease", "shell", dseq, "--service", "web", "--", "echo", "hello from the journey"); !strings.Contains(sh, "hello from the journey") {
		t.Errorf("shell output %q", sh)
	}

	// A manifest update: a new image, applied in place.
	sdlData, err := os.ReadFile(sdlFile)
	if err != nil {
		t.Fatal(err)
	}
	image := webImage(t, sdlData)
	updated := strings.Replace(string(sdlData), image, image+"-alpine", 1)
	updatedFile := filepath.Join(t.TempDir(), "web-updated.yaml")
	if err := os.WriteFile(updatedFile, []byte(updated), 0o600); err != nil {
		t.Fatal(err)
	}
	must("tenant", "deployment", "update", updatedFile, dseq)
	testenv.Eventually(t, time.Minute, "the new image is deployed", func() bool {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == image+"-alpine"
	})
	testenv.EventuallyNoError(t, time.Minute, "the updated lease is ready", func() error {
		var st api.LeaseStatus
		if err := json.Unmarshal([]byte(must("tenant", "lease", "status", dseq, "-o", "json")), &st); err != nil {
			return err
		}
		if !st.Berth.Ready {
			return fmt.Errorf("not ready: %+v", st.Berth)
		}
		return nil
	})

	// The provider's balance checker withdraws while the lease runs (every 2 s here).
	var running int64
	testenv.EventuallyNoError(t, 2*time.Minute, "a withdrawal while the lease runs", func() error {
		b, err := providerBalance(must)
		if err != nil {
			return err
		}
		if b.LastWithdrawalHeight == 0 || len(b.Earnings) == 0 {
			return fmt.Errorf("no withdrawal yet: %+v", b)
		}
		running = b.LastWithdrawalHeight
		return nil
	})

	// Close: the namespace goes.
	must("tenant", "close", dseq)
	testenv.Eventually(t, 2*time.Minute, "the lease's namespace is gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	checkPaidToTheBlock(t, must, lease, running)
	checkDeployFailures(t, must, cli, sdlData)
	checkCorpusDeploy(t, must, cli, home)
}

// checkCorpusDeploy: a published file as tenants write them since BME, priced in uact
// for a provider with host=akash signed by Akash's auditor, deploys as written, is
// leased and paid in uact, and the provider's earnings say so.
func checkCorpusDeploy(t *testing.T, must func(...string) string, cli func(...string) (string, error), home string) {
	t.Helper()
	corpusFile := filepath.Join("..", "..", "internal", "sdl", "testdata", "corpus", "aa-minesweeper_deploy", "input.yaml")
	out, progress, err := runSplit(t, "tenant", "deploy", corpusFile, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy %s: %v\n%s%s", corpusFile, err, progress, out)
	}
	var act deployResult
	if err := json.Unmarshal([]byte(out), &act); err != nil {
		t.Fatalf("deploy output: %v\n%s", err, out)
	}
	if len(act.Leases) != 1 || !act.Leases[0].Status.Berth.Ready || act.Leases[0].Price.Denom != ledger.DenomACT {
		t.Fatalf("uact deploy: want one ready lease priced in uact, got %+v", act)
	}
	// At about 0.3 uact a block it pays a whole uact within seconds; the provider
	// withdraws every 2 s.
	testenv.EventuallyNoError(t, time.Minute, "the provider earned uact", func() error {
		b, err := providerBalance(must)
		if err != nil {
			return err
		}
		for _, e := range b.Earnings {
			if strings.HasSuffix(e, ledger.DenomACT) && !strings.HasPrefix(e, "0") {
				return nil
			}
		}
		return fmt.Errorf("provider's earnings %v, none in uact", b.Earnings)
	})
	// The provider's operator sees why: it bid (at its price, in uact) and won.
	order := act.Leases[0].ID.Order().String()
	decided := must("provider", "decisions", "--from", "provider", "--order", order)
	for _, want := range []string{"RESULT", order, "bid", "priced", act.Leases[0].Price.Short(), "won", "leased"} {
		if !strings.Contains(decided, want) {
			t.Errorf("provider decisions lack %q:\n%s", want, decided)
		}
	}
	if _, err := cli("provider", "decisions", act.Leases[0].ID.Provider, "--from", "tenant"); err == nil || !strings.Contains(err.Error(), "only the provider's own account") {
		t.Errorf("a tenant reading a provider's decisions: %v", err)
	}
	must("tenant", "close", strconv.FormatUint(act.DSeq, 10))
}

// checkDeployFailures: an invalid SDL file writes nothing to the ledger; no bid in
// time closes the deployment (the deposit comes back), unless --keep.
func checkDeployFailures(t *testing.T, must func(...string) string, cli func(...string) (string, error), sdlData []byte) {
	t.Helper()
	deployments := func() []ledger.DeploymentResponse {
		var ds []ledger.DeploymentResponse
		if err := json.Unmarshal([]byte(must("tenant", "deployment", "list", "-o", "json")), &ds); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	before := len(deployments())
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(sdlData), "units: 0.5", "units: -1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("tenant", "deploy", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("an invalid file: %v\n%s", err, out)
	}
	if n := len(deployments()); n != before {
		t.Fatalf("an invalid file wrote %d deployment(s)", n-before)
	}

	// Nobody serves region=mars: no bid.
	mars := filepath.Join(dir, "mars.yaml")
	withRegion := strings.Replace(string(sdlData), "pricing:", "attributes:\n        region: mars\n      pricing:", 1)
	if err := os.WriteFile(mars, []byte(withRegion), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("tenant", "deploy", mars, "--provider", "akash1nobody"); err == nil || !strings.Contains(err.Error(), "--provider") {
		t.Fatalf("a bad --provider: %v\n%s", err, out)
	}
	out, err := cli("tenant", "deploy", mars, "--bid-timeout", "3s")
	if err == nil || !strings.Contains(err.Error(), "no bid") || !strings.Contains(out, "closed in block") {
		t.Fatalf("no bid: %v\n%s", err, out)
	}
	// The time for bids running out while the ledger is being asked (here before the
	// first question) is the same end: no bid, not a query error.
	out, err = cli("tenant", "deploy", mars, "--bid-timeout", "1ns")
	if err == nil || !strings.Contains(err.Error(), "no bid") || !strings.Contains(out, "closed in block") {
		t.Fatalf("no bid within 1ns: %v\n%s", err, out)
	}
	out, err = cli("tenant", "deploy", mars, "--bid-timeout", "3s", "--keep")
	if err == nil || !strings.Contains(err.Error(), "kept open (--keep)") {
		t.Fatalf("no bid, --keep: %v\n%s", err, out)
	}
	ds := deployments()
	if len(ds) != before+3 {
		t.Fatalf("%d deployments, want %d", len(ds), before+3)
	}
	slices.SortFunc(ds, func(a, b ledger.DeploymentResponse) int {
		return cmp.Compare(a.Deployment.ID.DSeq, b.Deployment.ID.DSeq)
	})
	closed, kept := ds[len(ds)-2], ds[len(ds)-1]
	if closed.Deployment.State != ledger.DeploymentClosed || kept.Deployment.State != ledger.DeploymentActive {
		t.Fatalf("deployments %s and %s, want closed and kept active", closed.Deployment.State, kept.Deployment.State)
	}
	if closed.Escrow.Balance.Amount.Sign() != 0 {
		t.Errorf("the closed deployment still holds %s", closed.Escrow.Balance)
	}
	must("tenant", "close", strconv.FormatUint(kept.Deployment.ID.DSeq, 10))
}

// runSplit runs berth with args and returns its standard output and error apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand(slog.New(slog.DiscardHandler))
	var o, e strings.Builder
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return o.String(), e.String(), err
}

// webImage is the web service's image in an SDL file.
func webImage(t *testing.T, sdlData []byte) string {
	t.Helper()
	for line := range strings.SplitSeq(string(sdlData), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	t.Fatal("no image in the SDL file")
	return ""
}

// checkPaidToTheBlock: the closed lease paid its provider its price for every block
// from its creation to its close, in whole units (what the ledger withdrew and paid
// out at close), and the provider's records agree with the ledger.
func checkPaidToTheBlock(t *testing.T, must func(...string) string, id market.LeaseID, running int64) {
	t.Helper()
	var leases []ledger.LeaseResponse
	if err := json.Unmarshal([]byte(must("provider", "leases", "--from", "provider", "--state", ledger.LeaseClosed, "-o", "json")), &leases); err != nil {
		t.Fatal(err)
	}
	var l *ledger.LeaseResponse
	for i := range leases {
		if leases[i].Lease.ID == id {
			l = &leases[i]
		}
	}
	if l == nil {
		t.Fatalf("lease %s is not among the provider's closed leases", id)
	}
	blocks := l.Lease.ClosedOn - l.Lease.CreatedAt
	t.Logf("lease %s: blocks %d–%d at %s", id, l.Lease.CreatedAt, l.Lease.ClosedOn, l.Lease.Price)
	accrued := l.Lease.Price.Amount.MulUint(uint64(blocks))
	whole, _ := accrued.TruncateUint()
	withdrawn, _ := l.Payment.Withdrawn.Amount.TruncateUint()
	if blocks <= 0 || withdrawn != whole {
		t.Errorf("lease %s: %d blocks at %s accrue %s (%d whole units), but %d were paid to the provider",
			id, blocks, l.Lease.Price, accrued, whole, withdrawn)
	}
	if rest := accrued.Sub(l.Payment.Withdrawn.Amount); rest.Cmp(l.Payment.Balance.Amount) != 0 {
		t.Errorf("lease %s: accrued %s, withdrawn %s, but %s left in the payment, want %s", id, accrued, l.Payment.Withdrawn.Amount, l.Payment.Balance.Amount, rest)
	}

	// The provider's withdrawal while the lease ran was within its life, and its record
	// of earnings is what the ledger paid, to the unit.
	if running <= l.Lease.CreatedAt || running > l.Lease.ClosedOn {
		t.Errorf("withdrawal at height %d, outside the lease's life (%d–%d)", running, l.Lease.CreatedAt, l.Lease.ClosedOn)
	}
	want := fmt.Sprintf("%d%s", withdrawn, l.Lease.Price.Denom)
	testenv.EventuallyNoError(t, time.Minute, "the provider's earnings match the ledger", func() error {
		b, err := providerBalance(must)
		if err != nil {
			return err
		}
		// In the lease's denomination (the leased-IP deployment paid in another).
		if !slices.Contains(b.Earnings, want) {
			return fmt.Errorf("provider's earnings %v, the ledger paid %s", b.Earnings, want)
		}
		return nil
	})
}

// balanceStatus is the balance part of the provider's status.
type balanceStatus struct {
	Earnings             []string `json:"earnings"`
	LastWithdrawalHeight int64    `json:"last_withdrawal_height"`
	LastError            string   `json:"last_error"`
}

// providerBalance reads the dev provider's balance status from its gateway.
func providerBalance(must func(...string) string) (balanceStatus, error) {
	var st struct {
		Berth struct {
			Balance *balanceStatus `json:"balance"`
		} `json:"berth"`
	}
	if err := json.Unmarshal([]byte(must("provider", "status", "--from", "provider")), &st); err != nil {
		return balanceStatus{}, err
	}
	if st.Berth.Balance == nil {
		return balanceStatus{}, errors.New("no balance in the provider's status yet")
	}
	return *st.Berth.Balance, nil
}

// leasedIPSDL is a game server on a leased IP, paid in IBC USDC (the journey checks
// its uakt and uact earnings to the block).
//
//go:embed testdata/leased-ip.sdl.yaml
var leasedIPSDL string
