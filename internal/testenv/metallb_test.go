package testenv_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// assigned is how long MetalLB may take to give a Service an address (or to say why
// not) after the Service and its pool exist.
const assigned = 30 * time.Second

// TestMetalLBAssignsAddresses proves what berth's IP operator relies on in MetalLB's
// controller, run against the test API server: a LoadBalancer Service gets an address
// of an IPAddressPool; Services with one sharing key and no port in common share an
// address, across namespaces; another key gets another address; an exhausted pool
// leaves a Service pending with an AllocationFailed event, but not one that can share;
// a deleted Service's address goes to a pending one; the address-pool annotation picks a pool, and a pool with
// autoAssign false serves only Services naming it; the pools' status counts addresses;
// Services of another load-balancer class are left alone.
func TestMetalLBAssignsAddresses(t *testing.T) {
	kube := testenv.Cluster(t)
	class := "berth.dev/metallb-test-" + randomSuffix(t)
	m := kube.MetalLB(t, localenv.MetalLBOptions{LoadBalancerClass: class})
	cs := kube.Clientset(t)
	ns1, ns2 := kube.Namespace(t), kube.Namespace(t)

	// Of another class: no controller of this test touches it.
	lbService(t, cs, ns1, "other-class", "berth.dev/nobody", nil, 80)

	main := netip.MustParsePrefix("192.0.2.0/30")
	named := netip.MustParsePrefix("192.0.2.16/30")
	testenv.IPAddressPool(t, m, localenv.IPAddressPool{Name: "main", Addresses: []string{main.String()}})
	testenv.IPAddressPool(t, m, localenv.IPAddressPool{Name: "named", Addresses: []string{named.String()}, Manual: true})
	testenv.IPAddressPool(t, m, localenv.IPAddressPool{Name: "buggy", Addresses: []string{"192.0.2.252/30"}, Manual: true, AvoidBuggyIPs: true})

	// A /30 is four addresses, network and broadcast included (main hands out
	// 192.0.2.0 too); avoidBuggyIPs leaves out only those ending in .0 or .255, here
	// 192.0.2.255.
	waitPoolStatus(t, m, "main", localenv.IPAddressPoolStatus{AvailableIPv4: 4})
	waitPoolStatus(t, m, "buggy", localenv.IPAddressPoolStatus{AvailableIPv4: 3})

	// The operator sees only the default pool "main" below: a Service takes any free
	// address of the auto-assigned pools.
	ipA := waitAddress(t, cs, ns1, lbService(t, cs, ns1, "a", class, nil, 80))
	if !main.Contains(ipA) {
		t.Fatalf("service a got %s, not an address of pool main (%s)", ipA, main)
	}
	svc, err := cs.CoreV1().Services(ns1).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Annotations[localenv.MetalLBAllocatedFromPoolAnnotation]; got != "main" {
		t.Errorf("service a: %s = %q, want main", localenv.MetalLBAllocatedFromPoolAnnotation, got)
	}
	t.Logf("service a: %s, event %s", ipA, waitEvent(t, cs, ns1, "a", "IPAllocated"))

	// One sharing key, ports 80 and 443, two namespaces: one address.
	shared := map[string]string{localenv.MetalLBAllowSharedIPAnnotation: "key-1"}
	ipB1 := waitAddress(t, cs, ns1, lbService(t, cs, ns1, "b1", class, shared, 80))
	ipB2 := waitAddress(t, cs, ns2, lbService(t, cs, ns2, "b2", class, shared, 443))
	if ipB1 != ipB2 || ipB1 == ipA {
		t.Fatalf("sharing key-1: b1 got %s and b2 %s, want one address other than a's %s", ipB1, ipB2, ipA)
	}
	// The same key with a port already used on that address: another address.
	ipB3 := waitAddress(t, cs, ns2, lbService(t, cs, ns2, "b3", class, shared, 80))
	if ipB3 == ipB1 || ipB3 == ipA {
		t.Fatalf("sharing key-1 on port 80 again: b3 got %s (a %s, b1 %s), want a free address", ipB3, ipA, ipB1)
	}
	// Another key: another address, the pool's last.
	ipC := waitAddress(t, cs, ns1, lbService(t, cs, ns1, "c", class,
		map[string]string{localenv.MetalLBAllowSharedIPAnnotation: "key-2"}, 8080))
	for _, ip := range []netip.Addr{ipA, ipB1, ipB3} {
		if ipC == ip {
			t.Fatalf("key-2: c got %s, already used (a %s, b1/b2 %s, b3 %s)", ipC, ipA, ipB1, ipB3)
		}
	}
	waitPoolStatus(t, m, "main", localenv.IPAddressPoolStatus{AssignedIPv4: 4})
	t.Logf("a %s; key-1: b1 (%s, port 80) and b2 (%s, port 443) %s, b3 (port 80) %s; key-2: c %s", ipA, ns1, ns2, ipB1, ipB3, ipC)

	// Exhausted: the Service stays without an address; MetalLB says why in a Warning
	// event on it (nothing in its status).
	lbService(t, cs, ns2, "d", class, nil, 80)
	msg := waitEvent(t, cs, ns2, "d", "AllocationFailed")
	t.Logf("service d (pool exhausted): AllocationFailed: %s", msg)
	if want := fmt.Sprintf("Failed to allocate IP for %q: no available IPs", ns2+"/d"); msg != want {
		t.Errorf("AllocationFailed message %q, want %q", msg, want)
	}
	if ing := lbIngress(t, cs, ns2, "d"); len(ing) != 0 {
		t.Fatalf("service d got %v from an exhausted pool", ing)
	}

	// Deleting a Service frees its address, and the pending one gets it.
	if err := cs.CoreV1().Services(ns1).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ipD := waitAddress(t, cs, ns2, "d"); ipD != ipA {
		t.Fatalf("service d got %s after a (%s) was deleted, want a's address", ipD, ipA)
	}
	waitPoolStatus(t, m, "main", localenv.IPAddressPoolStatus{AssignedIPv4: 4})

	// With the pool full, a Service of a sharing key still gets an address of that key
	// on which its ports are free, and none where they are not.
	ipI := waitAddress(t, cs, ns1, lbService(t, cs, ns1, "i", class, shared, 8443))
	if ipI != ipB1 && ipI != ipB3 {
		t.Fatalf("key-1 on port 8443 with the pool full: i got %s, want b1's %s or b3's %s", ipI, ipB1, ipB3)
	}
	lbService(t, cs, ns1, "h", class, shared, 80)
	t.Logf("service h (key-1, port 80 taken on every key-1 address): AllocationFailed: %s", waitEvent(t, cs, ns1, "h", "AllocationFailed"))
	if ing := lbIngress(t, cs, ns1, "h"); len(ing) != 0 {
		t.Fatalf("service h got %v, its port 80 is taken on every key-1 address", ing)
	}
	waitPoolStatus(t, m, "main", localenv.IPAddressPoolStatus{AssignedIPv4: 4})

	// The address-pool annotation picks a pool, autoAssign false or not.
	ipE := waitAddress(t, cs, ns1, lbService(t, cs, ns1, "e", class,
		map[string]string{localenv.MetalLBAddressPoolAnnotation: "named"}, 80))
	if !named.Contains(ipE) {
		t.Fatalf("service e asked for pool named (%s) and got %s", named, ipE)
	}
	waitPoolStatus(t, m, "named", localenv.IPAddressPoolStatus{AssignedIPv4: 1, AvailableIPv4: 3})
	// Without it, a Service never gets an address of a pool with autoAssign false,
	// even with the auto-assigned pools full.
	lbService(t, cs, ns1, "f", class, nil, 80)
	t.Logf("service f (only a manual pool has room): AllocationFailed: %s", waitEvent(t, cs, ns1, "f", "AllocationFailed"))
	// A pool that does not exist.
	lbService(t, cs, ns1, "g", class, map[string]string{localenv.MetalLBAddressPoolAnnotation: "nope"}, 80)
	t.Logf("service g (unknown pool): AllocationFailed: %s", waitEvent(t, cs, ns1, "g", "AllocationFailed"))
	for _, name := range []string{"f", "g"} {
		if ing := lbIngress(t, cs, ns1, name); len(ing) != 0 {
			t.Fatalf("service %s got %v", name, ing)
		}
	}

	// Everything above took MetalLB several rounds; the Service of another class has
	// had time to be touched, and was not: no address, no event. Its node ports were
	// allocated by the API server, which needs no controller.
	other, err := cs.CoreV1().Services(ns1).Get(t.Context(), "other-class", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Status.LoadBalancer.Ingress) != 0 || other.Annotations[localenv.MetalLBAllocatedFromPoolAnnotation] != "" {
		t.Errorf("service of another class was assigned: %+v %v", other.Status.LoadBalancer, other.Annotations)
	}
	if other.Spec.Ports[0].NodePort == 0 {
		t.Errorf("service of another class has no node port")
	}
	if evs := events(t, cs, ns1, "other-class"); len(evs) != 0 {
		t.Errorf("events on the service of another class: %v", evs)
	}
}

// lbService creates a LoadBalancer Service of class with one TCP port and returns its
// name.
func lbService(t *testing.T, cs kubernetes.Interface, ns, name, class string, annotations map[string]string, port int32) string {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: &class,
			Selector:          map[string]string{"app": name},
			Ports:             []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: port}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return name
}

// lbIngress returns the Service's status.loadBalancer.ingress.
func lbIngress(t *testing.T, cs kubernetes.Interface, ns, name string) []corev1.LoadBalancerIngress {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service %s/%s: %v", ns, name, err)
	}
	return svc.Status.LoadBalancer.Ingress
}

// waitAddress waits for the Service's one load-balancer address.
func waitAddress(t *testing.T, cs kubernetes.Interface, ns, name string) netip.Addr {
	t.Helper()
	var ip netip.Addr
	testenv.EventuallyNoError(t, assigned, "an address for service "+ns+"/"+name, func() error {
		ing := lbIngress(t, cs, ns, name)
		if len(ing) != 1 {
			return fmt.Errorf("status.loadBalancer.ingress = %v; events: %v", ing, events(t, cs, ns, name))
		}
		var err error
		ip, err = netip.ParseAddr(ing[0].IP)
		return err
	})
	return ip
}

// events returns the events on the Service, as "Type Reason: message".
func events(t *testing.T, cs kubernetes.Interface, ns, name string) []string {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Service", "involvedObject.name": name}.String(),
	})
	if err != nil {
		t.Fatalf("list events of %s/%s: %v", ns, name, err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s %s (%s): %s", e.Type, e.Reason, e.Source.Component, e.Message))
	}
	return out
}

// waitEvent waits for an event with reason on the Service from MetalLB's controller and
// returns its message; the event type is Normal for IPAllocated, Warning otherwise.
func waitEvent(t *testing.T, cs kubernetes.Interface, ns, name, reason string) string {
	t.Helper()
	wantType := corev1.EventTypeWarning
	if reason == "IPAllocated" {
		wantType = corev1.EventTypeNormal
	}
	var msg string
	testenv.EventuallyNoError(t, assigned, reason+" event on "+ns+"/"+name, func() error {
		list, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": "Service", "involvedObject.name": name, "reason": reason}.String(),
		})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Source.Component == "metallb-controller" && e.Type == wantType {
				msg = e.Message
				return nil
			}
		}
		return fmt.Errorf("events: %v", events(t, cs, ns, name))
	})
	return msg
}

func waitPoolStatus(t *testing.T, m *localenv.MetalLB, pool string, want localenv.IPAddressPoolStatus) {
	t.Helper()
	testenv.EventuallyNoError(t, assigned, "status of pool "+pool, func() error {
		got, err := m.PoolStatus(t.Context(), pool)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("status %+v, want %+v", got, want)
		}
		return nil
	})
}
