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
	cp.helperDefaults(t, &opts.Kubeconfig, &opts.Dir, &opts.Restart)
	if opts.Namespace == "" {
		opts.Namespace = cp.Namespace(t)
	}
	m, err := localenv.StartMetalLB(t.Context(), opts)
	Require(t, err)
	stopWithTest(t, "metallb controller", m.Service)
	return m
}

// helperDefaults fills a helper process's options left empty: an admin kubeconfig of
// the cluster, a directory of the test's, and a policy that restarts nothing (a test
// must not hide a crash: an exit fails it).
func (cp *Kube) helperDefaults(t testing.TB, kubeconfig, dir *string, restart *localenv.RestartPolicy) {
	if *kubeconfig == "" {
		*kubeconfig = cp.Kubeconfig(t)
	}
	if *dir == "" {
		*dir = t.TempDir()
	}
	if *restart == (localenv.RestartPolicy{}) {
		restart.Max = -1
	}
}

// stopWithTest stops a helper process when the test ends, failing the test if it
// exited meanwhile, and logs its log when the test failed.
func stopWithTest(t testing.TB, what string, s *localenv.Service) {
	t.Cleanup(func() {
		if err := s.Err(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(s.LogPath()); err == nil {
				t.Logf("%s log (%s):\n%s", what, s.LogPath(), b)
			}
		}
	})
}

// IPAddressPool applies pool (addresses inside TEST-NET-1, 192.0.2.0/24, only) in m's
// namespace, failing the test on error. The namespace's deletion removes it.
func IPAddressPool(t testing.TB, m *localenv.MetalLB, pool localenv.IPAddressPool) {
	t.Helper()
	if err := m.ApplyPool(t.Context(), pool); err != nil {
		t.Fatalf("IPAddressPool: %v", err)
	}
}
