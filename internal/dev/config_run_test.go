package dev

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/chain"
	"berth.dev/berth/internal/fixture"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/testenv"
)

var (
	rpcLine      = regexp.MustCompile(`RPC (tcp://127\.0\.0\.1:\d+),`)
	providerLine = regexp.MustCompile(`provider +(\S+) at https://`)
)

// TestRunDevConfig runs `berth dev --config` for real: a file that sets a pricing
// script and attributes gives a provider registered on the ledger with the file's
// attributes (and the dev cluster's capabilities, signed by the dev auditors on the
// new chain), that bids the script's price and declines what the dev attributes
// alone would have matched. A file with a key berth dev owns stops it before it
// makes the home.
func TestRunDevConfig(t *testing.T) {
	if _, err := localenv.FindBinaries(t.Context()); err != nil {
		testenv.Require(t, err)
	}
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Home = filepath.Join(dir, "dev")
	cfg.Nodes, cfg.GPUNodes = 1, 0

	cfg.ProviderConfig = filepath.Join(dir, "refused.yaml")
	if err := os.WriteFile(cfg.ProviderConfig, []byte("bidding: {timeout: 1m}\nnode: tcp://ledger.example.com:26657\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(t.Context(), cfg, slog.New(slog.DiscardHandler), &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "line 2: node: ") {
		t.Fatalf("Run with a refused key: %v", err)
	}
	if _, err := os.Stat(cfg.Home); !os.IsNotExist(err) {
		t.Fatalf("Run made the home before refusing the file: %v", err)
	}

	script := filepath.Join(dir, "price.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 1234\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.ProviderConfig = filepath.Join(dir, "provider.yaml")
	file := "attributes:\n  - {key: region, value: eu-central}\n  - {key: organization, value: berth-test}\n" +
		"bidding:\n  pricing:\n    strategy: script\n    script: {path: " + script + "}\n"
	if err := os.WriteFile(cfg.ProviderConfig, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, done := startDev(ctx, t, cfg, "berth dev")
	banner := out.String()
	if !strings.Contains(banner, "configured by "+cfg.ProviderConfig) {
		t.Errorf("banner does not name the config file:\n%s", banner)
	}
	rpc, prov := rpcLine.FindStringSubmatch(banner), providerLine.FindStringSubmatch(banner)
	if rpc == nil || prov == nil {
		t.Fatalf("banner names no RPC or provider:\n%s", banner)
	}

	// The registration and the genesis audits carry the file's attributes.
	c, err := chain.Dial(ctx, rpc[1])
	if err != nil {
		t.Fatal(err)
	}
	var reg ledger.Provider
	if err := ledger.QueryProvider.Into(ctx, c, ledger.ProviderRequest{Owner: prov[1]}, &reg); err != nil {
		t.Fatal(err)
	}
	caps, err := cfg.capabilities(localenv.DevStorageClasses)
	if err != nil {
		t.Fatal(err)
	}
	want := append(market.Attributes{{Key: "region", Value: "eu-central"}, {Key: "organization", Value: "berth-test"}}, caps...)
	byKey := func(a, b market.Attribute) int { return strings.Compare(a.Key, b.Key) }
	slices.SortFunc(want, byKey) // the ledger keeps them sorted
	if !slices.Equal(reg.Attributes, want) {
		t.Errorf("registered attributes\n got %v\nwant %v", reg.Attributes, want)
	}
	var audits ledger.AuditResponse
	if err := ledger.QueryAudit.Into(ctx, c, ledger.AuditRequest{Owner: prov[1]}, &audits); err != nil {
		t.Fatal(err)
	}
	if len(audits.Attributes) != len(Auditors) {
		t.Errorf("%d auditors signed the provider's attributes, want %d", len(audits.Attributes), len(Auditors))
	}
	for _, a := range audits.Attributes {
		if !slices.Contains(a.Attributes, market.Attribute{Key: "region", Value: "eu-central"}) {
			t.Errorf("auditor %s signed %v, not the file's region", a.Auditor, a.Attributes)
		}
	}

	// The bid engine prices with the script, against the file's attributes.
	res, _, err := sdl.Parse(fixture.WebSDL, sdl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rpcc := devGRPC(t, banner)
	ask := func(g market.GroupSpec) *providerv1.ValidateGroupSpecResponse {
		t.Helper()
		spec, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rpcc.ValidateGroupSpec(ctx, &providerv1.ValidateGroupSpecRequest{GroupSpecJson: spec})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	g := res.Groups[0] // requires region=us-west, berth dev's own region
	if r := ask(g); r.GetBid() || r.GetReason() != bidengine.ReasonAttributes {
		t.Errorf("group requiring region=us-west: bid %v, reason %q (%s); want a decline for its attributes", r.GetBid(), r.GetReason(), r.GetDetail())
	}
	g.Requirements.Attributes = market.Attributes{{Key: "region", Value: "eu-central"}}
	r := ask(g)
	if !r.GetBid() || r.GetPrice().GetDenom() != ledger.DenomAKT || !strings.HasPrefix(r.GetPrice().GetAmount(), "1234") {
		t.Errorf("group requiring region=eu-central: bid %v at %v (%s: %s); want the script's 1234uakt", r.GetBid(), r.GetPrice(), r.GetReason(), r.GetDetail())
	}

	stopRun(t, cancel, done)
}

// devGRPC is a client of the provider gRPC gateway the banner names.
func devGRPC(t *testing.T, banner string) providerv1.ProviderRPCClient {
	t.Helper()
	m := grpcLine.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner names no gRPC address:\n%s", banner)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}))) // the dev gateway's certificate is self-made
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return providerv1.NewProviderRPCClient(conn)
}
