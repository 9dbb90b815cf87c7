package dev

import (
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/sdl"
)

// devServes are the reasons berth dev may decline a corpus group for: what its small
// simulated cluster does not have (room, a GPU model, a storage class, an attribute or
// auditor the tenant requires). Any other reason (a denomination, a price, an order it
// cannot read) would stop a tenant's file that the cluster could run.
var devServes = []string{
	bidengine.ReasonCapacityNodes, bidengine.ReasonCapacityGPU, bidengine.ReasonCapacityStorage,
	bidengine.ReasonCapacityLeasedIPs, bidengine.ReasonCapacityNodePorts,
	bidengine.ReasonGPUCapability, bidengine.ReasonStorageCapability,
	bidengine.ReasonAttributes, bidengine.ReasonSignedBy,
}

var grpcLine = regexp.MustCompile(`gRPC (127\.0\.0\.1:\d+)`)

// screenCorpus asks berth dev's provider, over its gRPC ValidateGroupSpec, about every
// group of every corpus SDL that Akash reads, and fails on a decline for a reason
// other than what the dev cluster lacks.
func screenCorpus(t *testing.T, banner string) {
	t.Helper()
	m := grpcLine.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("banner names no gRPC address:\n%s", banner)
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}))) // screening only; the dev gateway's certificate is self-made
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	rpcc := providerv1.NewProviderRPCClient(conn)
	files, err := filepath.Glob("../sdl/testdata/corpus/*/input.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus under ../sdl/testdata/corpus (%v)", err)
	}
	reasons := map[string]int{}
	gpuBids := map[string]int{} // groups bid on that ask for the dev cluster's GPU models
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := sdl.Parse(b, sdl.Options{})
		if err != nil {
			continue // Akash rejects it too
		}
		for _, g := range res.Groups {
			if !slices.Contains(ledger.DefaultDenoms(), g.Resources[0].Price.Denom) {
				continue // a denomination no chain takes (TestCorpusDeploysAsWritten)
			}
			spec, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			r, err := rpcc.ValidateGroupSpec(t.Context(), &providerv1.ValidateGroupSpecRequest{GroupSpecJson: spec})
			if err != nil {
				t.Fatalf("%s group %q: %v", filepath.Base(filepath.Dir(f)), g.Name, err)
			}
			if r.GetBid() {
				reasons[bidengine.ReasonPriced]++
				for _, m := range []string{"a100", "h100"} {
					if strings.Contains(string(spec), "/model/"+m) {
						gpuBids[m]++
					}
				}
				if r.GetPrice().GetDenom() != g.Resources[0].Price.Denom {
					t.Errorf("%s group %q: bid in %s on an order priced in %s", filepath.Base(filepath.Dir(f)), g.Name, r.GetPrice().GetDenom(), g.Resources[0].Price.Denom)
				}
				continue
			}
			reasons[r.GetReason()]++
			if !slices.Contains(devServes, r.GetReason()) {
				t.Errorf("%s group %q (priced %s): no bid: %s: %s", filepath.Base(filepath.Dir(f)), g.Name, g.Resources[0].Price, r.GetReason(), r.GetDetail())
			}
		}
	}
	if reasons[bidengine.ReasonPriced] == 0 {
		t.Error("berth dev bid on no corpus group")
	}
	// The dev GPU nodes, described only by GPU feature discovery's labels, are an A100
	// and an H100 node: SDLs asking for either get bids.
	if strings.Contains(banner, "H100") && (gpuBids["a100"] == 0 || gpuBids["h100"] == 0) {
		t.Errorf("no bid on the corpus's A100 or H100 groups: %v", gpuBids)
	}
	t.Logf("berth dev on the corpus's groups: %v; bids on GPU models %v", reasons, gpuBids)
}

// TestDevBannerOlderChain: a resumed chain made before uact says what it lacks and
// how to get a chain that takes it; a current one says nothing of the kind.
func TestDevBannerOlderChain(t *testing.T) {
	d := devBanner{cfg: Config{Home: "/h"}, cp: &localenv.ControlPlane{}, resumed: true, denoms: []string{"uakt"}}
	var old strings.Builder
	printDevBanner(&old, d)
	want := "made by an older berth: it takes uakt only, not uact, " + ledger.DenomUSDC + " (--reset makes a new chain)"
	if !strings.Contains(old.String(), want) {
		t.Errorf("banner of an older chain lacks %q:\n%s", want, old.String())
	}
	d.denoms = ledger.DefaultDenoms()
	var cur strings.Builder
	printDevBanner(&cur, d)
	if strings.Contains(cur.String(), "older berth") {
		t.Errorf("banner of a current chain:\n%s", cur.String())
	}
}

// TestDevBannerResumedLeases: the leases of the last run whose manifests the kept
// cluster holds are counted as resumed; those it does not hold are named, to be sent
// their manifests.
func TestDevBannerResumedLeases(t *testing.T) {
	d := devBanner{cfg: Config{Home: "/h"}, cp: &localenv.ControlPlane{}, denoms: ledger.DefaultDenoms(),
		leases: make([]ledger.LeaseResponse, 3), manifestTimeout: 5 * time.Minute}
	var all strings.Builder
	printDevBanner(&all, d)
	if want := "3 lease(s) from the last run resumed"; !strings.Contains(all.String(), want) || strings.Contains(all.String(), "send-manifest") {
		t.Errorf("every lease resumed: the banner lacks %q or asks for manifests:\n%s", want, all.String())
	}
	d.unrecorded = []market.LeaseID{{DSeq: 12}, {DSeq: 40}}
	var some strings.Builder
	printDevBanner(&some, d)
	for _, want := range []string{"1 lease(s) from the last run resumed", "2 lease(s) active on the ledger have no manifest on this cluster (dseq 12, 40)", "tenant send-manifest FILE DSEQ"} {
		if !strings.Contains(some.String(), want) {
			t.Errorf("two leases without manifests: the banner lacks %q:\n%s", want, some.String())
		}
	}
}

// TestDevBannerManifestTimeout: leases without a manifest are to be sent their manifests
// within the provider's manifest_timeout, or whenever the tenant likes when it is 0s
// (no watchdog), never "within 0s".
func TestDevBannerManifestTimeout(t *testing.T) {
	d := devBanner{cfg: Config{Home: "/h"}, cp: &localenv.ControlPlane{}, denoms: ledger.DefaultDenoms(),
		leases: []ledger.LeaseResponse{{}}, unrecorded: []market.LeaseID{{DSeq: 7}}, manifestTimeout: 5 * time.Minute}
	for _, c := range []struct {
		timeout time.Duration
		want    string
	}{{5 * time.Minute, "within 5m, or the provider closes the lease"}, {0, "whenever you like: the provider waits for them (manifest_timeout 0s)"}} {
		d.manifestTimeout = c.timeout
		var b strings.Builder
		printDevBanner(&b, d)
		if !strings.Contains(b.String(), c.want) || strings.Contains(b.String(), "within 0s") {
			t.Errorf("manifest_timeout %s: the banner lacks %q:\n%s", c.timeout, c.want, b.String())
		}
	}
}
