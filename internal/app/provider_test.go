package app

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	berthv1 "berth.dev/berth/api/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/balance"
	"berth.dev/berth/internal/bus"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

// TestProviderRun composes the provider daemon as `berth provider run` does: it bids on
// a matching order, runs the lease once its manifest arrives until its status is
// ready, tears it down when the tenant closes the deployment, and counts it all in
// /metrics.
func TestProviderRun(t *testing.T) {
	k := testenv.Cluster(t)
	if err := k.AddNodes(t.Context(), localenv.NodeSpec{Name: "app-run-1", CPU: "8", Memory: "32Gi"}); err != nil {
		t.Fatal(err)
	}
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	p, home := startTestProvider(t, l, k, "cluster: {unhealthy_close_after: 1h}\ngateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\", manifest_timeout: 3s}\n",
		"127.0.0.1:0", func(p *Provider) { p.closer.Every = 100 * time.Millisecond })
	c := l.Client(t)
	me := l.Address(t, "provider")
	tenant := l.Address(t, "tenant")
	dep := parseWeb(t)
	tb := l.Broadcaster(t, c, "tenant")
	order := deployWeb(t, tb, dep, tenant, 7, 5_000_000)
	// Default scale prices: 2 × (500 m × 0.01 + 512 MiB × 0.002 + 1024 MiB × 0.0002 + 1 endpoint) = 14.4576 per block.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var b ledger.Bid
		err := ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: order.Bid(me)}, &b)
		if err == nil {
			if b.Price.String() != "14.457600000000000000uakt" {
				t.Fatalf("bid %+v", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bid: %v (decisions %+v)", err, p.Engine().History().Last(5))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	// The tenant leases it; the manifest is handed to the cluster (the gateway will do
	// that); the lease runs and its status becomes ready.
	lease := order.Bid(me).Lease()
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: order.Bid(me)}); err != nil {
		t.Fatal(err)
	}
	// The manifest goes through the gateway, with a token signed by the tenant's key;
	// the lease's status there becomes ready.
	gw := newGatewayClient(t, l, p.Gateway(), "tenant")
	manifestJSON, err := json.Marshal(dep.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := gw.do(t, "PUT", "/deployment/7/manifest", manifestJSON); code != 200 {
		t.Fatalf("send manifest: %d %s", code, body)
	}
	// A 200 means the manifest is on the cluster already: it survives any stop.
	recordedVersion := func() string {
		t.Helper()
		dc, err := dynamic.NewForConfig(k.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		m, err := dc.Resource(berthv1.ManifestResource).Namespace(kube.LeaseNamespace(lease)).Get(t.Context(), kube.ManifestName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the manifest answered 200 is not recorded: %v", err)
		}
		v, _, _ := unstructured.NestedString(m.Object, "spec", "version")
		return v
	}
	if v := recordedVersion(); v != hex.EncodeToString(dep.Version) {
		t.Fatalf("recorded version %s, want %x", v, dep.Version)
	}
	waitFor(t, "the lease ready through the gateway", func() bool {
		code, body := gw.do(t, "GET", "/lease/7/1/1/status", nil)
		var st struct {
			Services map[string]struct{ Available, Total int }
		}
		return code == 200 && json.Unmarshal(body, &st) == nil && st.Services["web"].Total == 2 && st.Services["web"].Available == 2
	})
	if code, body := gw.do(t, "GET", "/status", nil); code != 200 || !strings.Contains(string(body), `"address":"`+me+`"`) {
		t.Fatalf("provider status: %d %s", code, body)
	}
	// The tenant updates the deployment: from then on only the new manifest is
	// accepted, and it is applied in place.
	updated := slices.Clone(dep.Manifest)
	updated[0].Services = slices.Clone(updated[0].Services)
	updated[0].Services[0].Image += "-v2"
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgUpdateDeployment{ID: market.DeploymentID{Owner: tenant, DSeq: 7}, Version: updated.Version()}); err != nil {
		t.Fatal(err)
	}
	if code, body := gw.do(t, "PUT", "/deployment/7/manifest", manifestJSON); code != 422 || !strings.Contains(string(body), "not the deployment's version") {
		t.Fatalf("the old manifest after the update: %d %s", code, body)
	}
	updatedJSON, err := json.Marshal(updated)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := gw.do(t, "PUT", "/deployment/7/manifest", updatedJSON); code != 200 {
		t.Fatalf("the updated manifest: %d %s", code, body)
	}
	if v := recordedVersion(); v != hex.EncodeToString(updated.Version()) {
		t.Fatalf("after the update's 200, recorded version %s, want %x", v, updated.Version())
	}
	waitFor(t, "the update applied", func() bool {
		st, ok := p.Manager().State(lease)
		return ok && st.Phase == deploy.PhaseDeployed && bytes.Equal(st.Version, updated.Version())
	})
	// gRPC: the status, and the bid engine's answer on a group like the one leased.
	conn, err := grpc.NewClient(p.GRPCGateway(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}))) // a status client; the certificate is checked below for HTTPS
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	rpcc := providerv1.NewProviderRPCClient(conn)
	waitFor(t, "gRPC status with the lease", func() bool {
		st, err := rpcc.GetStatus(t.Context(), &emptypb.Empty{})
		return err == nil && st.GetAddress() == me && st.GetCluster().GetLeases() == 1 && st.GetCluster().GetLeasesReady() == 1
	})
	specJSON, err := json.Marshal(dep.Groups[0])
	if err != nil {
		t.Fatal(err)
	}
	screened, err := rpcc.ValidateGroupSpec(t.Context(), &providerv1.ValidateGroupSpecRequest{GroupSpecJson: specJSON, Owner: tenant})
	if err != nil || !screened.GetBid() || screened.GetPrice().GetAmount() != "14.457600000000000000" {
		t.Fatalf("ValidateGroupSpec: %v %v", screened, err)
	}
	// The provider's certificate is on the ledger, and the gateway serves it.
	waitFor(t, "the provider's certificate registered", func() bool {
		var certs ledger.CertificatesResponse
		return ledger.QueryCertificates.Into(t.Context(), c, ledger.CertificatesRequest{Owner: me, State: ledger.CertValid}, &certs) == nil &&
			len(certs.Certificates) == 1 && gw.serverSerial() == certs.Certificates[0].Serial
	})
	// The tenant closes the deployment: the provider tears the lease down.
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCloseDeployment{ID: market.DeploymentID{Owner: tenant, DSeq: 7}}); err != nil {
		t.Fatal(err)
	}
	cs := k.Clientset(t)
	waitFor(t, "the lease's namespace gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), kube.LeaseNamespace(lease), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// The unhealthy-lease policy (window shortened for the test): a lease whose pods
	// cannot be scheduled is closed by the provider with reason unstable, then torn down.
	p.unhealthy.SetWindow(2 * time.Second)
	order8 := deployWeb(t, tb, dep, tenant, 8, 5_000_000)
	waitFor(t, "a bid on the second order", func() bool {
		var b ledger.Bid
		return ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: order8.Bid(me)}, &b) == nil
	})
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: order8.Bid(me)}); err != nil {
		t.Fatal(err)
	}
	stuck := dep.Manifest[0]
	stuck.Services = slices.Clone(stuck.Services)
	stuck.Services[0].Resources.GPU = &market.GPU{Units: market.ResourceValue{Val: 1}, Attributes: market.Attributes{{Key: "vendor/nvidia/model/h100", Value: "true"}}}
	lease8 := order8.Bid(me).Lease()
	if err := p.Manager().ManifestReceived(t.Context(), lease8, dep.Version, stuck); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the unhealthy lease closed as unstable", func() bool {
		var l ledger.LeaseResponse
		err := ledger.QueryLease.Into(t.Context(), c, ledger.LeaseRequest{ID: lease8}, &l)
		return err == nil && l.Lease.State == ledger.LeaseClosed && l.Lease.Reason == ledger.ReasonUnstable
	})
	waitFor(t, "the unhealthy lease torn down", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), kube.LeaseNamespace(lease8), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// A lease that gets no manifest has its bid closed by the watchdog.
	order9 := deployWeb(t, tb, dep, tenant, 9, 5_000_000)
	waitFor(t, "a bid on the third order", func() bool {
		var b ledger.Bid
		return ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: order9.Bid(me)}, &b) == nil
	})
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: order9.Bid(me)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease without manifest closed", func() bool {
		var l ledger.LeaseResponse
		err := ledger.QueryLease.Into(t.Context(), c, ledger.LeaseRequest{ID: order9.Bid(me).Lease()}, &l)
		return err == nil && l.Lease.State == ledger.LeaseClosed && l.Lease.Reason == ledger.ReasonManifestTimeout
	})
	// The metrics, on the metrics listener and on the gateway (counters settle a moment
	// after the ledger shows their effect).
	wants := []string{`berth_bid_decisions_total{reason="priced",result="bid"} 3`, `berth_bid_decisions_total{reason="leased",result="won"} 3`,
		"berth_bid_latency_seconds_count 3", "# HELP berth_bidengine_height", `berth_bus_published_total{bus="leases"} 6`,
		`berth_manifests_received_total{outcome="accepted"} 2`, `berth_manifests_received_total{outcome="invalid"} 1`, "provider_deployment_manager 0", "provider_order_manager 0",
		`provider_order_handler_total{action="start"} 3`, `provider_order_handler_total{action="stop"} 3`, "provider_manifest_manager 0", "berth_manifest_timeouts_total 1", "# HELP berth_gateway_requests_total",
		// One lease became ready (the stuck one never did); the ledger answers; the
		// balance is above its reserve; the process's own metrics.
		"berth_lease_ready_seconds_count 1", "berth_ledger_reachable 1", "berth_balance_low 0", "# HELP berth_ledger_height", "# HELP go_goroutines", "# HELP process_start_time_seconds"}
	var missing []string
	metricsHave := func(body []byte) bool {
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(string(body), want) {
				missing = append(missing, want)
			}
		}
		return len(missing) == 0
	}
	testenv.EventuallyNoError(t, 10*time.Second, "the metrics", func() error {
		_, body, err := testenv.Get(t.Context(), "http://"+p.MetricsAddr()+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !metricsHave(body) {
			return fmt.Errorf("lacking %q", missing)
		}
		return nil
	})
	// The same on the gateway. (A lease closed without a manifest is held a moment by
	// the manager after its close is counted on the bus: wait again.)
	testenv.EventuallyNoError(t, 10*time.Second, "the gateway's metrics", func() error {
		if code, body := gw.do(t, "GET", "/metrics", nil); code != 200 || !metricsHave(body) {
			return fmt.Errorf("gateway /metrics: %d, lacks %q", code, missing)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(home, "provider", "bidengine.cursor")); err != nil {
		t.Errorf("cursor not saved: %v", err)
	}
}

// mustCheck checks a test's provider configuration.
func mustCheck(t *testing.T, cfg config.ProviderConfig) config.Checked {
	t.Helper()
	checked, err := cfg.Check()
	if err != nil {
		t.Fatal(err)
	}
	return checked
}

// startTestProvider registers the ledger's "provider" account (region us-west) and runs
// a provider for it on the cluster with the given provider.yaml lines, until the test
// ends; before runs after it is made and before it runs. It returns once the provider
// is ready, with its home.
func startTestProvider(t *testing.T, l *testenv.LedgerNode, k *testenv.Kube, yaml, metricsListen string, before func(*Provider)) (*Provider, string) {
	t.Helper()
	home := l.KeyHome(t, "provider")
	c := l.Client(t)
	me := l.Address(t, "provider")
	if _, err := l.Broadcaster(t, c, "provider").Broadcast(t.Context(), &ledger.MsgCreateProvider{Owner: me, HostURI: "https://p.example:8443",
		Attributes: market.Attributes{{Key: "region", Value: "us-west"}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadProviderConfig(testenv.WriteFile(t, "provider.yaml", fmt.Sprintf("home: %s\nnode: %s\nkubeconfig: %s\n%s", home, l.RPC(), k.Kubeconfig(t), yaml)),
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProvider(t.Context(), mustCheck(t, cfg), metricsListen, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(p)
	}
	testenv.Go(t, p.Run)
	select {
	case <-p.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("provider not ready")
	}
	return p, home
}

// deployWeb creates, with tb (the tenant's broadcaster), deployment dseq of
// fixture.WebSDL with the deposit (uakt), and returns its order.
// parseWeb is fixture.WebSDL, parsed.
func parseWeb(t *testing.T) *sdl.Result {
	t.Helper()
	dep, _, err := sdl.Parse(fixture.WebSDL, sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dep
}

func deployWeb(t *testing.T, tb *chain.Broadcaster, dep *sdl.Result, tenant string, dseq uint64, deposit market.Uint) market.OrderID {
	t.Helper()
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCreateDeployment{
		ID: market.DeploymentID{Owner: tenant, DSeq: dseq}, Groups: dep.Groups, Version: dep.Version,
		Deposit: market.Coin{Amount: deposit, Denom: "uakt"},
	}); err != nil {
		t.Fatal(err)
	}
	return market.OrderID{Owner: tenant, DSeq: dseq, GSeq: 1, OSeq: 1}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what, cond)
}

// gatewayClient talks to a provider's gateway as a tenant, with a bearer token
// signed by the tenant's ledger key.
type gatewayClient struct {
	base   string
	token  string
	client *http.Client
	serial string
}

func newGatewayClient(t *testing.T, l *testenv.LedgerNode, addr, keyName string) *gatewayClient {
	t.Helper()
	signer, err := l.Keys.Signer(keyName)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := auth.SignToken(auth.Claims{Issuer: l.Address(t, keyName), IssuedAt: now.Unix(), NotBefore: now.Unix(),
		ExpiresAt: now.Add(time.Hour).Unix(), Version: auth.TokenVersion, Leases: auth.Leases{Access: auth.AccessFull}}, signer)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayClient{base: "https://" + addr, token: tok}
	g.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, // the server's certificate is checked against the ledger below
		VerifyConnection: func(cs tls.ConnectionState) error {
			g.serial = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		},
	}}}
	return g
}

func (g *gatewayClient) do(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, g.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	code, b, err := testenv.Do(g.client, req)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

// serverSerial is the serial of the certificate the gateway presented.
func (g *gatewayClient) serverSerial() string { return g.serial }

// TestProviderUnfundedLease: when a deployment's escrow runs out, the ledger closes its
// lease for insufficient funds; the provider tears the lease down, its balance checker
// publishes lease_unfunded, and the earnings it records are what the ledger paid.
func TestProviderUnfundedLease(t *testing.T) {
	k := testenv.Cluster(t)
	if err := k.AddNodes(t.Context(), localenv.NodeSpec{Name: "app-unfunded-1", CPU: "8", Memory: "32Gi"}); err != nil {
		t.Fatal(err)
	}
	params := ledger.DefaultParams()
	params.DeploymentMinDeposit = []market.Coin{{Amount: 100, Denom: "uakt"}}
	l := testenv.Ledger(t, testenv.LedgerOptions{Params: &params, BlockInterval: 200 * time.Millisecond})
	var events *bus.Subscription[balance.Event]
	p, _ := startTestProvider(t, l, k, "gateway: {listen: \"127.0.0.1:0\", grpc_listen: \"127.0.0.1:0\"}\nbalance: {check_interval: 1s, withdraw_period: \"0\"}\n", "",
		func(p *Provider) {
			var err error
			if events, err = p.BalanceEvents().Subscribe(64, func(ev balance.Event) bool { return ev.Kind == balance.KindLeaseUnfunded }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(events.Close)
		})
	c := l.Client(t)
	me := l.Address(t, "provider")

	// A deployment funded for about 40 blocks (8 s) at the provider's 14.4576 per block.
	tenant := l.Address(t, "tenant")
	dep := parseWeb(t)
	tb := l.Broadcaster(t, c, "tenant")
	bid := deployWeb(t, tb, dep, tenant, 9, 600).Bid(me)
	testenv.EventuallyNoError(t, 30*time.Second, "the provider bids", func() error {
		var b ledger.Bid
		return ledger.QueryBid.Into(t.Context(), c, ledger.BidRequest{ID: bid}, &b)
	})
	if _, err := tb.Broadcast(t.Context(), &ledger.MsgCreateLease{BidID: bid}); err != nil {
		t.Fatal(err)
	}
	lease := bid.Lease()
	gw := newGatewayClient(t, l, p.Gateway(), "tenant")
	manifestJSON, err := json.Marshal(dep.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := gw.do(t, "PUT", "/deployment/9/manifest", manifestJSON); code != 200 {
		t.Fatalf("send manifest: %d %s", code, body)
	}
	cs := k.Clientset(t)
	ns := kube.LeaseNamespace(lease)
	testenv.EventuallyNoError(t, 30*time.Second, "the lease's namespace exists", func() error {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return err
	})

	// The escrow runs out: the ledger closes the lease, the provider tears it down.
	var closed ledger.LeaseResponse
	testenv.EventuallyNoError(t, time.Minute, "the ledger closes the lease for insufficient funds", func() error {
		if err := ledger.QueryLease.Into(t.Context(), c, ledger.LeaseRequest{ID: lease}, &closed); err != nil {
			return err
		}
		if closed.Lease.State != ledger.LeaseInsufficientFunds {
			return fmt.Errorf("lease is %s", closed.Lease.State)
		}
		return nil
	})
	testenv.Eventually(t, time.Minute, "the lease's namespace is gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	select {
	case ev := <-events.Events():
		if len(ev.Leases) != 1 || ev.Leases[0] != lease {
			t.Errorf("lease_unfunded event %+v, want lease %s", ev, lease)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no lease_unfunded event")
	}
	paid, _ := closed.Payment.Withdrawn.Amount.TruncateUint()
	if paid == 0 {
		t.Fatalf("the ledger paid nothing for lease %s: %+v", lease, closed.Payment)
	}
	testenv.Eventually(t, 30*time.Second, "the recorded earnings are the ledger's payout", func() bool {
		st := p.Balance().Status()
		return len(st.Earnings) == 1 && st.Earnings[0] == market.Coin{Amount: market.Uint(paid), Denom: "uakt"}
	})
}

// TestProviderWaitsForTheLedger: started while its ledger node is down, the provider
// waits for it, and its gateway's address says so (/status 503 with the reason) until
// the node answers; then the same address serves the gateway, and /status reports the
// node reachable.
func TestProviderWaitsForTheLedger(t *testing.T) {
	k := testenv.Cluster(t)
	l := testenv.Ledger(t, testenv.LedgerOptions{})
	home := l.KeyHome(t, "provider")
	c := l.Client(t)
	if _, err := l.Broadcaster(t, c, "provider").Broadcast(t.Context(), &ledger.MsgCreateProvider{Owner: l.Address(t, "provider"), HostURI: "https://p.example:8443"}); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg, err := config.LoadProviderConfig(testenv.WriteFile(t, "provider.yaml", fmt.Sprintf("home: %s\nnode: %s\nkubeconfig: %s\ngateway: {listen: %q}\n", home, l.RPC(), k.Kubeconfig(t), addr)),
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	logs := testenv.NewMarkerWriter("the ledger node does not answer; retrying")
	type built struct {
		p   *Provider
		err error
	}
	done := make(chan built, 1)
	go func() {
		p, err := NewProvider(t.Context(), mustCheck(t, cfg), "", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
		done <- built{p, err}
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	get := func(path string) (int, []byte, error) {
		resp, err := hc.Get("https://" + addr + path)
		if err != nil {
			return 0, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	type statusBody struct {
		Berth struct {
			Starting string `json:"starting"`
			Ledger   *struct {
				Node      string `json:"node"`
				Reachable bool   `json:"reachable"`
				Error     string `json:"error"`
			} `json:"ledger"`
		} `json:"berth"`
	}
	select {
	case <-logs.Seen():
	case b := <-done:
		t.Fatalf("the provider was built with its ledger node down: %v", b.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no retry logged: %s", logs)
	}
	var s statusBody
	testenv.Eventually(t, 30*time.Second, "/status 503 saying the provider waits for the ledger node", func() bool {
		code, body, err := get("/status")
		if err != nil || code != http.StatusServiceUnavailable || json.Unmarshal(body, &s) != nil {
			return false
		}
		return s.Berth.Starting != "" && s.Berth.Ledger != nil && !s.Berth.Ledger.Reachable && s.Berth.Ledger.Error != "" && s.Berth.Ledger.Node == l.RPC()
	})
	if code, body, err := get("/deployment/1/manifest"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(string(body), "waiting for the ledger node") {
		t.Fatalf("a tenant route while starting: %d %s %v", code, body, err)
	}

	l.Start(t)
	var b built
	select {
	case b = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the provider did not start once the ledger node answered")
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.p.Gateway() != addr {
		t.Fatalf("the gateway serves on %s, want the start-up address %s", b.p.Gateway(), addr)
	}
	defer testenv.Go(t, b.p.Run)()
	testenv.Eventually(t, 30*time.Second, "/status 200 with the ledger node reachable", func() bool {
		code, body, err := get("/status")
		s = statusBody{}
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &s) != nil {
			return false
		}
		return s.Berth.Starting == "" && s.Berth.Ledger != nil && s.Berth.Ledger.Reachable
	})
}
