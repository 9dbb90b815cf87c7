package bench

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/testenv"
)

// TestLeaseReadyBench runs `berth bench lease-ready` small on the test cluster: every
// figure is printed as `name value unit` and is a real measurement, and the teardown
// leaves no lease namespace behind. (The figures themselves are in docs/benchmarks.md,
// from full-size runs.)
func TestLeaseReadyBench(t *testing.T) {
	k := testenv.Cluster(t)
	b := DefaultLeaseReadyBench()
	b.ControlPlane, b.Nodes, b.Leases, b.Burst, b.Rate, b.Timeout = k.ControlPlane, 3, 4, 2, 50, 2*time.Minute
	// Lease IDs of their own: a rerun must not land in the last run's namespaces,
	// which the namespace controller may still be deleting.
	b.NodePrefix, b.Owner = "bench-test-", fmt.Sprintf("akash1benchtest%d", time.Now().UnixNano())
	var out bytes.Buffer
	res, err := RunLeaseReadyBench(t.Context(), b, &out, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lease_ready_p50", "lease_ready_p99", "lease_ready_max", "burst_2_all_ready", "burst_ready_p50",
		"rss_per_lease_at_4", "heap_per_lease_at_4", "cpu_per_lease_berth",
		"cpu_per_lease_etcd", "cpu_per_lease_kube-apiserver", "cpu_per_lease_kube-controller-manager", "cpu_per_lease_kube-scheduler", "cpu_per_lease_kwok",
		"teardown_4"}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(res) != len(want) || len(lines) != len(want) {
		t.Fatalf("results %v, output:\n%s", res, out.String())
	}
	for i, r := range res {
		f := strings.Fields(lines[i])
		if r.Name != want[i] || len(f) != 3 || f[0] != r.Name {
			t.Fatalf("result %d: %+v, line %q", i, r, lines[i])
		}
		if v, err := strconv.ParseFloat(f[1], 64); err != nil || (r.Unit == "s" && v <= 0) {
			t.Fatalf("line %q: a time must be positive", lines[i])
		}
		if r.Name == "cpu_per_lease_kube-apiserver" && r.Value <= 0 {
			t.Fatalf("line %q: the API server served the leases", lines[i])
		}
	}
	cs := k.Clientset(t)
	for i := range b.Leases {
		id := market.LeaseID{Owner: b.Owner, DSeq: uint64(i + 1), GSeq: 1, OSeq: 1, Provider: "akash1benchprovider"}
		ns, err := cs.CoreV1().Namespaces().Get(t.Context(), kube.LeaseNamespace(id), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) && (err != nil || ns.DeletionTimestamp == nil) {
			t.Fatalf("lease %s: namespace left behind (%v)", id, err)
		}
	}
	bad := b
	bad.Burst = 5
	if _, err := RunLeaseReadyBench(t.Context(), bad, &out, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "burst: 5") {
		t.Fatalf("burst above leases: %v", err)
	}
}
