package operatortest_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/testenv"
)

// TestOneWatchPerKind: each operator's process holds one cache, so one watch of each
// kind it reads (the Lease of leader election is read, not watched). The counts are
// the operators' whole view of the cluster: a new informer, or a kind watched twice,
// fails here.
func TestOneWatchPerKind(t *testing.T) {
	k, _ := operatortest.Cluster(t)
	lb := k.MetalLB(t, localenv.MetalLBOptions{LoadBalancerClass: "berth.dev/test-watches"})
	const provider, chain = "akash1watches", "berth-test-1"
	ns := k.Namespace(t)
	le := operator.LeaderElection{Namespace: ns, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}

	hc := hostname.DefaultConfig()
	hc.Provider, hc.ChainID = provider, chain
	hostnameCtrl, err := hostname.New(hc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ic := ip.DefaultConfig()
	ic.Provider, ic.ChainID, ic.MetalLBNamespace, ic.LoadBalancerClass = provider, chain, lb.Namespace, lb.LoadBalancerClass
	ipCtrl, err := ip.New(ic, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	vc := inventoryop.DefaultConfig()
	vc.Name = "watches"
	inventoryCtrl, err := inventoryop.New(vc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inventoryCtrl.Close() })

	for _, tc := range []struct {
		name string
		ctrl operator.Controller
		want map[string]int
	}{
		{"hostname", hostnameCtrl, map[string]int{"berth.dev/providerhosts": 1, "networking.k8s.io/ingresses": 1}},
		{"ip", ipCtrl, map[string]int{"berth.dev/providerleasedips": 1, "services": 1, "events": 1, "metallb.io/ipaddresspools": 1}},
		{"inventory", inventoryCtrl, map[string]int{"nodes": 1, "pods": 1, "persistentvolumeclaims": 1, "namespaces": 1, "berth.dev/inventories": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := rest.CopyConfig(k.RESTConfig())
			watches := testenv.CountWatches(rc)
			le := le
			le.Name = "watches-" + tc.name
			base, _ := operatortest.Start(t, rc, operator.Options{Name: tc.name, Listen: "127.0.0.1:0", LeaderElection: le}, tc.ctrl)
			testenv.EventuallyNoError(t, 30*time.Second, "leading, synced", func() error {
				code, _, err := testenv.Get(t.Context(), base+"/readyz")
				if err != nil {
					return err
				}
				if code != http.StatusOK {
					return fmt.Errorf("readyz %d", code)
				}
				if open := watches.Open(); !maps.Equal(open, tc.want) {
					return fmt.Errorf("open watches %v, want %v", open, tc.want)
				}
				return nil
			})
			peak := watches.Peak()
			for _, what := range slices.Sorted(maps.Keys(peak)) {
				t.Logf("%s: watches %s (at most %d at once)", tc.name, what, peak[what])
				if peak[what] > 1 {
					t.Errorf("%s was watched %d times at once", what, peak[what])
				}
			}
			if !maps.Equal(peak, tc.want) {
				t.Errorf("watched %v, want %v", peak, tc.want)
			}
		})
	}
}
