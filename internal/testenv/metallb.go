package testenv

import (
	"os"
	"testing"

	"berth.dev/berth/internal/localenv"
)

// MetalLB starts MetalLB's controller (built by hack/metallb.sh) for this test,
// watching the shared control plane through an admin kubeconfig, and stops it when the
// test ends. Kubeconfig and Dir are filled in when empty, and Namespace (where its
// IPAddressPools go) with a new namespace of the test. Controllers of tests that run at
// once must serve disjoint Services: give each its own opts.LoadBalancerClass, unless
// the test is the only one in its package creating LoadBalancer Services. Without the
// binary the test is skipped (failed under CI=true).
func (cp *Kube) MetalLB(t testing.TB, opts localenv.MetalLBOptions) *localenv.MetalLB {
	t.Helper()
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = cp.Kubeconfig(t)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Restart == (localenv.RestartPolicy{}) {
		opts.Restart.Max = -1 // a test must not hide a crash: an exit fails it
	}
	if opts.Namespace == "" {
		opts.Namespace = cp.Namespace(t)
	}
	m, err := localenv.StartMetalLB(t.Context(), opts)
	Require(t, err)
	t.Cleanup(func() {
		if err := m.Err(); err != nil {
			t.Errorf("metallb controller: %v", err)
		}
		m.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(m.LogPath()); err == nil {
				t.Logf("metallb controller log (%s):\n%s", m.LogPath(), b)
			}
		}
	})
	return m
}

// IPAddressPool applies pool (addresses inside TEST-NET-1, 192.0.2.0/24, only) in m's
// namespace, failing the test on error. The namespace's deletion removes it.
func IPAddressPool(t testing.TB, m *localenv.MetalLB, pool localenv.IPAddressPool) {
	t.Helper()
	if err := m.ApplyPool(t.Context(), pool); err != nil {
		t.Fatalf("IPAddressPool: %v", err)
	}
}
