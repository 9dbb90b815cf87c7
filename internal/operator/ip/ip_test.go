package ip

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"k8s.io/client-go/rest"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testChain = "berth-test-1"

// env is one test's cluster, with berth's CRDs and a MetalLB controller of its own
// (its own load-balancer class, so that controllers of other tests leave its
// Services alone) serving pool, a block of TEST-NET-1 (never contacted).
type env struct {
	k     *testenv.Kube
	rc    *rest.Config
	cs    kubernetes.Interface
	dc    dynamic.Interface
	lb    *localenv.MetalLB
	owner ownership.Owner
	cfg   Config
}

func newEnv(t *testing.T, pool localenv.IPAddressPool) *env {
	t.Helper()
	k, dc := operatortest.Cluster(t)
	cs := k.Clientset(t)
	sum := sha256.Sum256([]byte(t.Name()))
	class := fmt.Sprintf("berth.dev/test-%x", sum[:4])
	lb := k.MetalLB(t, localenv.MetalLBOptions{LoadBalancerClass: class})
	testenv.IPAddressPool(t, lb, pool)
	owner := ownership.Owner{Provider: fmt.Sprintf("akash1ip%x", sum[:8]), ChainID: testChain}
	cfg := DefaultConfig()
	cfg.Provider, cfg.ChainID, cfg.Listen = owner.Provider, owner.ChainID, ""
	cfg.LeaderElection.Disabled = true
	cfg.Pool, cfg.MetalLBNamespace, cfg.LoadBalancerClass = pool.Name, lb.Namespace, class
	return &env{k: k, rc: k.RESTConfig(), cs: cs, dc: dc, lb: lb, owner: owner, cfg: cfg}
}

// start runs the operator until the test ends; stop ends it early.
func (e *env) start(t *testing.T, cfg Config) (c *Controller, stop func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(cfg, NewMetrics(reg), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	base, stop := operatortest.Start(t, e.rc, operator.Options{Name: "ip", Listen: "127.0.0.1:0", LeaderElection: cfg.LeaderElection.WithDefaults("berth-ip-test"), Resync: cfg.Resync, Registry: reg,
		Handlers: map[string]http.Handler{"/usage": c.UsageHandler()}}, c)
	usageURL.Store(t.Name(), base+"/usage")
	return c, stop
}

var usageURL sync.Map

// createLeasedIP creates a ProviderLeasedIP as the cluster service writes it.
func (e *env) createLeasedIP(t *testing.T, ns, name string, id market.LeaseID, endpoint, service string, port int32, proto string) {
	t.Helper()
	labels := ownership.LeaseLabels(id, e.owner.ChainID)
	labels["berth.dev/service"] = service
	p := &berthv1.ProviderLeasedIP{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ProviderLeasedIP"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: berthv1.ProviderLeasedIPSpec{
			Lease: berthv1.LeaseRef{Owner: id.Owner, DSeq: fmt.Sprint(id.DSeq), GSeq: int64(id.GSeq), OSeq: int64(id.OSeq), Provider: id.Provider},
			Name:  endpoint, Service: service, Port: port, ExternalPort: port, Protocol: proto,
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	if _, err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) leased(t *testing.T, ns, name string) (*berthv1.ProviderLeasedIP, error) {
	t.Helper()
	u, err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return asLeasedIP(u)
}

// waitAssigned waits until the ProviderLeasedIP has its address.
func (e *env) waitAssigned(t *testing.T, ns, name string) *berthv1.ProviderLeasedIP {
	const phase = berthv1.LeasedIPAssigned
	t.Helper()
	var p *berthv1.ProviderLeasedIP
	testenv.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("ProviderLeasedIP %s/%s %s", ns, name, phase), func() error {
		var err error
		if p, err = e.leased(t, ns, name); err != nil {
			return err
		}
		if p.Status.Phase != phase {
			return fmt.Errorf("phase %q (%s)", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	return p
}

func lease(provider string, dseq uint64) market.LeaseID {
	return market.LeaseID{Owner: "akash1tenanta", DSeq: dseq, GSeq: 1, OSeq: 1, Provider: provider}
}

// TestLeasedIPLifecycle: a tenant's ports on one SDL IP endpoint, in two of its
// deployments, share one address; another endpoint and another tenant get their own;
// a pool with no address left is reported on the ProviderLeasedIP with MetalLB's
// words; a closed lease's Service goes and its address serves the waiting port; the
// usage endpoint lists it all; a Service deleted by hand comes back with its address.
func TestLeasedIPLifecycle(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "leased", Addresses: []string{"192.0.2.64/31"}})
	c, _ := e.start(t, e.cfg)
	nsA, nsB, nsC := e.k.Namespace(t), e.k.Namespace(t), e.k.Namespace(t)
	a, b := lease(e.owner.Provider, 1), lease(e.owner.Provider, 2)
	other := market.LeaseID{Owner: "akash1tenantb", DSeq: 3, GSeq: 1, OSeq: 1, Provider: e.owner.Provider}

	e.createLeasedIP(t, nsA, "web-tcp-80", a, "pub", "web", 80, "TCP")
	e.createLeasedIP(t, nsB, "api-udp-53", b, "pub", "api", 53, "UDP")
	pa := e.waitAssigned(t, nsA, "web-tcp-80")
	pb := e.waitAssigned(t, nsB, "api-udp-53")
	if pa.Status.IP == "" || pa.Status.IP != pb.Status.IP || !strings.HasPrefix(pa.Status.IP, "192.0.2.6") {
		t.Fatalf("one tenant's endpoint: addresses %q and %q, want one shared from the pool", pa.Status.IP, pb.Status.IP)
	}
	svc, err := e.cs.CoreV1().Services(nsA).Get(t.Context(), "web-tcp-80-ip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 80 || svc.Spec.Selector["berth.dev/service"] != "web" ||
		svc.Annotations[AnnotationAddressPool] != "leased" || len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Kind != "ProviderLeasedIP" {
		t.Errorf("Service %+v", svc)
	}
	if id, ok := e.owner.LeaseOf(svc.Labels); !ok || id != a {
		t.Errorf("Service labels %v", svc.Labels)
	}

	// Another tenant: its own address (the pool's second).
	e.createLeasedIP(t, nsC, "db-tcp-5432", other, "pub", "db", 5432, "TCP")
	pc := e.waitAssigned(t, nsC, "db-tcp-5432")
	if pc.Status.IP == pa.Status.IP {
		t.Fatalf("two tenants share %s", pc.Status.IP)
	}
	// The pool is empty now: a third endpoint waits, and says why.
	e.createLeasedIP(t, nsA, "web-tcp-8080", a, "second", "web", 8080, "TCP")
	testenv.EventuallyNoError(t, 30*time.Second, "the exhausted pool reported", func() error {
		p, err := e.leased(t, nsA, "web-tcp-8080")
		if err != nil {
			return err
		}
		// MetalLB's words: "no available IPs" first; its retries of a Service it has
		// refused may say otherwise. What counts is that its refusal is reported.
		if p.Status.Phase != berthv1.LeasedIPPending || !strings.Contains(p.Status.Message, "MetalLB cannot assign an address: Failed to allocate IP") {
			return fmt.Errorf("%s: %s", p.Status.Phase, p.Status.Message)
		}
		return nil
	})

	// Usage: the pool full, two addresses with their ports, one pending.
	testenv.EventuallyNoError(t, 30*time.Second, "usage", func() error {
		u := c.Usage(t.Context())
		if len(u.Pools) != 1 || u.Pools[0].Size != 2 || u.Pools[0].Available != 0 || len(u.IPs) != 2 || u.Pending != 1 {
			return fmt.Errorf("%+v", u)
		}
		return nil
	})
	raw, _ := usageURL.Load(t.Name())
	url, _ := raw.(string)
	code, body, err := testenv.Get(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	var u Usage
	if err := json.Unmarshal(body, &u); err != nil || code != http.StatusOK || len(u.IPs) != 2 {
		t.Fatalf("GET /usage: %d %s (%v)", code, body, err)
	}
	for _, ip := range u.IPs {
		if ip.IP == pa.Status.IP && (len(ip.Ports) != 2 || ip.Pool != "leased") {
			t.Errorf("shared address %+v", ip)
		}
	}

	// The other tenant's lease closes: its address goes to the waiting port.
	if err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(nsC).Delete(t.Context(), "db-tcp-5432", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "its Service deleted", func() error {
		if _, err := e.cs.CoreV1().Services(nsC).Get(t.Context(), "db-tcp-5432-ip", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if p := e.waitAssigned(t, nsA, "web-tcp-8080"); p.Status.IP != pc.Status.IP {
		t.Errorf("the freed address %s, the waiting port got %s", pc.Status.IP, p.Status.IP)
	}

	// A Service deleted by hand comes back, with the endpoint's address.
	if err := e.cs.CoreV1().Services(nsB).Delete(t.Context(), "api-udp-53-ip", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the Service back with its address", func() error {
		s, err := e.cs.CoreV1().Services(nsB).Get(t.Context(), "api-udp-53-ip", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ip := assignedIP(s); ip != pa.Status.IP {
			return fmt.Errorf("address %q, want %s", ip, pa.Status.IP)
		}
		return nil
	})
}

// TestLeasedIPRestart: an operator restarted with leases in place rebuilds from the
// cluster: nothing moves, and what changed while it was down converges.
func TestLeasedIPRestart(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "restart", Addresses: []string{"192.0.2.80/30"}})
	_, stop := e.start(t, e.cfg)
	ns := e.k.Namespace(t)
	a := lease(e.owner.Provider, 10)
	e.createLeasedIP(t, ns, "web-tcp-80", a, "pub", "web", 80, "TCP")
	before := e.waitAssigned(t, ns, "web-tcp-80")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e.createLeasedIP(t, ns, "web-tcp-443", a, "pub", "web", 443, "TCP")
	e.start(t, e.cfg)
	after := e.waitAssigned(t, ns, "web-tcp-443")
	if p := e.waitAssigned(t, ns, "web-tcp-80"); p.Status.IP != before.Status.IP || after.Status.IP != before.Status.IP {
		t.Errorf("addresses after the restart: %s and %s, want %s", p.Status.IP, after.Status.IP, before.Status.IP)
	}
}

// TestEndpointMigration: a tenant moves its endpoint's port to another deployment
// (POST /endpoint/migrate): the new lease's port is created while the old one's still
// holds the address (a port clash: MetalLB refuses it, and the operator says so), then
// the old one goes; the endpoint keeps its address.
func TestEndpointMigration(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "migrate", Addresses: []string{"192.0.2.104/30"}})
	e.start(t, e.cfg)
	nsA, nsB := e.k.Namespace(t), e.k.Namespace(t)
	a, b := lease(e.owner.Provider, 30), lease(e.owner.Provider, 31)
	e.createLeasedIP(t, nsA, "web-tcp-80", a, "pub", "web", 80, "TCP")
	before := e.waitAssigned(t, nsA, "web-tcp-80")
	e.createLeasedIP(t, nsB, "web-tcp-80", b, "pub", "web", 80, "TCP")
	testenv.EventuallyNoError(t, 30*time.Second, "the clash reported", func() error {
		p, err := e.leased(t, nsB, "web-tcp-80")
		if err != nil {
			return err
		}
		if p.Status.Phase != berthv1.LeasedIPPending || !strings.Contains(p.Status.Message, "MetalLB cannot assign") {
			return fmt.Errorf("%s: %s", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	if err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(nsA).Delete(t.Context(), "web-tcp-80", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := e.waitAssigned(t, nsB, "web-tcp-80"); after.Status.IP != before.Status.IP {
		t.Errorf("the endpoint moved from %s to %s", before.Status.IP, after.Status.IP)
	}
}

// TestEndpointMigrationDeleteFirst: the old lease's port goes before the new one's
// comes (the order of a migration is the manager's): the endpoint asks for its former
// address and gets it back, though MetalLB would have handed out a lower one; and an
// address someone else took meanwhile is not waited for.
func TestEndpointMigrationDeleteFirst(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "migrate2", Addresses: []string{"192.0.2.108/30"}})
	e.start(t, e.cfg)
	ns := e.k.Namespace(t)
	other := market.LeaseID{Owner: "akash1tenantb", DSeq: 40, GSeq: 1, OSeq: 1, Provider: e.owner.Provider}
	a, b := lease(e.owner.Provider, 41), lease(e.owner.Provider, 42)
	e.createLeasedIP(t, ns, "x-tcp-1", other, "x", "x", 1, "TCP")
	first := e.waitAssigned(t, ns, "x-tcp-1")
	e.createLeasedIP(t, ns, "web-tcp-80", a, "pub", "web", 80, "TCP")
	held := e.waitAssigned(t, ns, "web-tcp-80")
	del := func(name string) {
		t.Helper()
		if err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.EventuallyNoError(t, 30*time.Second, name+"'s Service gone", func() error {
			if _, err := e.cs.CoreV1().Services(ns).Get(t.Context(), name+"-ip", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
	}
	// The lower address is free again, then the endpoint's port goes and comes back in
	// another lease.
	del("x-tcp-1")
	del("web-tcp-80")
	e.createLeasedIP(t, ns, "api-tcp-80", b, "pub", "api", 80, "TCP")
	if got := e.waitAssigned(t, ns, "api-tcp-80"); got.Status.IP != held.Status.IP {
		t.Errorf("the endpoint's address %s, it had %s (the lower %s was free)", got.Status.IP, held.Status.IP, first.Status.IP)
	}
}

// TestEndpointMigrationLateRefusal: MetalLB refused the new lease's port while the old
// one held the endpoint's address; the old one goes, and the operator syncs the new
// one before MetalLB gives it the address: the refusal from before the release is not
// taken for someone else having it, and the endpoint keeps its address. MetalLB is
// played by hand (a load-balancer class no controller serves) to fix that order.
func TestEndpointMigrationLateRefusal(t *testing.T) {
	e := newEnv(t, localenv.IPAddressPool{Name: "migrate3", Addresses: []string{"192.0.2.112/30"}})
	cfg := e.cfg
	cfg.LoadBalancerClass = "berth.dev/test-played-by-hand"
	e.start(t, cfg)
	nsA, nsB := e.k.Namespace(t), e.k.Namespace(t)
	const addr = "192.0.2.113"
	service := func(ns string) *corev1.Service {
		t.Helper()
		var s *corev1.Service
		testenv.EventuallyNoError(t, 30*time.Second, "Service "+ns+"/web-tcp-80-ip", func() (err error) {
			s, err = e.cs.CoreV1().Services(ns).Get(t.Context(), "web-tcp-80-ip", metav1.GetOptions{})
			return err
		})
		return s
	}
	assign := func(s *corev1.Service) {
		t.Helper()
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr}}
		if _, err := e.cs.CoreV1().Services(s.Namespace).UpdateStatus(t.Context(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.createLeasedIP(t, nsA, "web-tcp-80", lease(e.owner.Provider, 50), "pub", "web", 80, "TCP")
	assign(service(nsA))
	e.waitAssigned(t, nsA, "web-tcp-80")

	e.createLeasedIP(t, nsB, "web-tcp-80", lease(e.owner.Provider, 51), "pub", "web", 80, "TCP")
	b := service(nsB)
	if pin := b.Annotations[AnnotationRequestIPs]; pin != addr {
		t.Fatalf("the new lease's Service asks for %q, want the endpoint's %s", pin, addr)
	}
	now := metav1.Now()
	if _, err := e.cs.CoreV1().Events(nsB).Create(t.Context(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "web-tcp-80-ip."},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: nsB, Name: b.Name, UID: b.UID},
		Reason:         reasonAllocationFailed, Type: corev1.EventTypeWarning, Count: 1,
		Message:        `Failed to allocate IP for "web-tcp-80-ip": can't change sharing key, address already in use by the port 80/TCP`,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "metallb-controller"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status := func(what, want string) {
		t.Helper()
		testenv.EventuallyNoError(t, 30*time.Second, what, func() error {
			p, err := e.leased(t, nsB, "web-tcp-80")
			if err != nil {
				return err
			}
			if p.Status.Phase != berthv1.LeasedIPPending || !strings.Contains(p.Status.Message, want) {
				return fmt.Errorf("%s: %s", p.Status.Phase, p.Status.Message)
			}
			return nil
		})
	}
	status("the refusal reported", "MetalLB cannot assign")

	if err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(nsA).Delete(t.Context(), "web-tcp-80", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "the old lease's Service gone", func() error {
		if _, err := e.cs.CoreV1().Services(nsA).Get(t.Context(), "web-tcp-80-ip", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	// Anything that syncs the new port now (here: a label) must not give up the address.
	if _, err := e.dc.Resource(berthv1.ProviderLeasedIPResource).Namespace(nsB).Patch(t.Context(), "web-tcp-80", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"test/touched":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	status("waiting for the address", "waiting for MetalLB to give the endpoint its address "+addr+" back")
	b = service(nsB)
	if pin := b.Annotations[AnnotationRequestIPs]; pin != addr {
		t.Fatalf("after the release the new lease's Service asks for %q, want %s", pin, addr)
	}
	assign(b)
	if p := e.waitAssigned(t, nsB, "web-tcp-80"); p.Status.IP != addr {
		t.Errorf("the endpoint moved from %s to %s", addr, p.Status.IP)
	}
}

// asLeasedIP converts a ProviderLeasedIP read through the dynamic client.
func asLeasedIP(u *unstructured.Unstructured) (*berthv1.ProviderLeasedIP, error) {
	p := &berthv1.ProviderLeasedIP{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("ProviderLeasedIP %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return p, nil
}
