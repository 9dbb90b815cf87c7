package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestInventoryLeasedIPPool: with a MetalLB pool, the leased-IP pool is the pool's
// size less the addresses others' LoadBalancer Services hold (MetalLB assigns them,
// the real controller); an address freed is offered again; the pool growing grows it.
func TestInventoryLeasedIPPool(t *testing.T) {
	kube := testenv.Cluster(t)
	cs := kube.Clientset(t)
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	lb := kube.MetalLB(t, localenv.MetalLBOptions{LoadBalancerClass: "berth.dev/test-inventory"})
	testenv.IPAddressPool(t, lb, localenv.IPAddressPool{Name: "inventory", Addresses: []string{"192.0.2.120/31"}})
	capacity := cluster.NewCapacity()
	inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, capacity, InventoryConfig{}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	inv.WithMetalLBPool(dc, MetalLBPool{Namespace: lb.Namespace, Name: "inventory"})
	defer testenv.Go(t, inv.Run)()
	if err := inv.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	if why := inv.NotSynced(); why != "" {
		t.Errorf("synced, yet NotSynced = %q", why)
	}
	free := func() (int64, error) {
		for _, p := range capacity.Snapshot().Pools {
			if p.Name == cluster.PoolLeasedIPs {
				return p.Capacity - p.Used, nil
			}
		}
		return 0, fmt.Errorf("no %s pool", cluster.PoolLeasedIPs)
	}
	waitFree := func(want int64) {
		t.Helper()
		testenv.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("%d leased IPs free", want), func() error {
			n, err := free()
			if err == nil && n != want {
				err = fmt.Errorf("%d free", n)
			}
			return err
		})
	}
	waitFree(2)

	// Someone else's LoadBalancer Service takes an address.
	ns := kube.Namespace(t)
	class := lb.LoadBalancerClass
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class, Ports: []corev1.ServicePort{{Port: 80}},
	}}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFree(1)
	if err := capacity.Check(); err != nil {
		t.Fatal(err)
	}
	// It goes: the address is offered again.
	if err := cs.CoreV1().Services(ns).Delete(t.Context(), "theirs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFree(2)
	// The pool grows.
	testenv.IPAddressPool(t, lb, localenv.IPAddressPool{Name: "inventory", Addresses: []string{"192.0.2.120/30"}})
	waitFree(4)
}

// TestInventoryLeasedIPPoolWithoutMetalLB: leased IPs from a MetalLB pool on a cluster
// that does not serve MetalLB's pools stop the inventory with what to do, instead of
// waiting for ever.
func TestInventoryLeasedIPPoolWithoutMetalLB(t *testing.T) {
	// A control plane of its own: the package's shared one may have MetalLB's CRDs.
	bin, err := localenv.FindBinaries(t.Context())
	testenv.Require(t, err)
	cp, err := localenv.StartControlPlane(t.Context(), localenv.ControlPlaneOptions{BinDir: bin, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	cs, dc := testenv.Clients(t, cp.RESTConfig())
	// Watching the cluster itself, and fed by the inventory operator's report: Run
	// returns the error at once either way (it once waited, in the second, for its
	// informers to stop, which only the end of its context did).
	for _, fromOperator := range []bool{false, true} {
		inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, cluster.NewCapacity(), InventoryConfig{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if fromOperator {
			inv.FromOperator(dc, "cluster", time.Minute)
		}
		inv.WithMetalLBPool(dc, MetalLBPool{Namespace: "metallb-system", Name: "leased"})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err = inv.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "install MetalLB, or set inventory.leased_ips") {
			t.Fatalf("Run (from the operator: %v): %v", fromOperator, err)
		}
	}
}

// TestInventoryNotSyncedSaysWhy: an inventory whose lists are refused (a role without
// them) never syncs, and says which list and why instead of waiting in silence.
func TestInventoryNotSyncedSaysWhy(t *testing.T) {
	kube := testenv.Cluster(t)
	rc := rest.CopyConfig(kube.RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:nobody:berth-without-roles"}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := NewInventory(startCache(t, cs, nil, testOwner), cs, cluster.NewCapacity(), InventoryConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if why := inv.NotSynced(); why != "the cluster's inventory has not been read yet" {
		t.Errorf("before Run: NotSynced = %q", why)
	}
	defer testenv.Go(t, inv.Run)()
	testenv.EventuallyNoError(t, 30*time.Second, "NotSynced naming the refused list", func() error {
		why := inv.NotSynced()
		if !strings.Contains(why, "has not been read: listing ") || !strings.Contains(why, "forbidden") || !strings.Contains(why, "berth-without-roles") {
			return fmt.Errorf("NotSynced = %q", why)
		}
		return nil
	})
}
