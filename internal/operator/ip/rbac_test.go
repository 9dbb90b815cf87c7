package ip

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/metallb"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/testenv"
)

const configDir = "../../../config/operators/ip"

// TestRBAC runs the operator as its service account with exactly config/operators/ip/
// rbac.yaml's permissions, from the example configuration file: it elects a leader,
// gives a port an address, reports an exhausted pool, deletes a Service, serves the
// pools' usage, and nothing it asks is refused. The role's pool Role is in
// metallb-system, so MetalLB's pools are there.
func TestRBAC(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "rbac", Addresses: []string{"192.0.2.96/32"}})
	// The example's namespace for MetalLB: a controller of this test's own there.
	lb := e.k.MetalLB(t, localenv.MetalLBOptions{Namespace: "metallb-system", LoadBalancerClass: e.cfg.LoadBalancerClass + "-rbac"})
	testenv.IPAddressPool(t, lb, localenv.IPAddressPool{Name: "leased-ips", Addresses: []string{"192.0.2.100/32"}})
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "namespace.yaml"))
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "rbac.yaml"))
	rc := rest.CopyConfig(e.k.RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:berth-system:berth-ip-operator"}
	cs, dc := testenv.Clients(t, rc)
	cfg := operatortest.ExampleConfig(t, filepath.Join(configDir, "ip-operator.yaml"), DecodeConfig)
	if cfg.MetalLBNamespace != "metallb-system" || cfg.Pool != "leased-ips" || cfg.Listen != "0.0.0.0:8086" {
		t.Fatalf("the example configuration: %+v", cfg)
	}
	cfg.Provider, cfg.ChainID, cfg.Listen = e.owner.Provider, e.owner.ChainID, ""
	cfg.LoadBalancerClass = lb.LoadBalancerClass
	cfg.LeaderElection = operator.LeaderElection{Namespace: "berth-system", Name: "berth-ip-rbac"}
	sa := &env{k: e.k, rc: rc, cs: cs, dc: dc, lb: lb, owner: e.owner, cfg: cfg}
	c, stop := sa.start(t, cfg)

	ns := e.k.Namespace(t)
	a := lease(e.owner.Provider, 1)
	e.createLeasedIP(t, ns, "web-tcp-80", a, "pub", "web", 80, "TCP")
	if p := e.waitAssigned(t, ns, "web-tcp-80"); p.Status.IP != "192.0.2.100" {
		t.Fatalf("address %s", p.Status.IP)
	}
	e.createLeasedIP(t, ns, "web-tcp-81", a, "other", "web", 81, "TCP")
	testenv.EventuallyNoError(t, 30*time.Second, "the exhausted pool reported", func() error {
		p, err := e.leased(t, ns, "web-tcp-81")
		if err != nil {
			return err
		}
		if p.Status.Phase != berthv1.LeasedIPPending || !strings.Contains(p.Status.Message, "MetalLB cannot assign") {
			return fmt.Errorf("%s: %s", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	if u := c.Usage(t.Context()); len(u.Pools) != 1 || u.Pools[0].Name != "leased-ips" || u.Pools[0].Size != 1 {
		t.Errorf("usage as the service account: %+v", u)
	}
	if err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Delete(t.Context(), "web-tcp-80", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAssigned(t, ns, "web-tcp-81")
	if err := stop(); err != nil {
		t.Fatalf("operator as its service account: %v", err)
	}
	// What the role must not allow: Secrets; another namespace's pools.
	if _, err := cs.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator may list Secrets (err %v)", err)
	}
	if _, err := dc.Resource(metallb.PoolResource).Namespace(e.lb.Namespace).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator may list pools outside metallb-system (err %v)", err)
	}
}
