package hostname

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testChain = "berth-test-1"

// env is one test's cluster clients, with berth's CRDs installed.
type env struct {
	cfg *rest.Config
	cs  kubernetes.Interface
	dc  dynamic.Interface
}

func newEnv(t *testing.T) *env {
	t.Helper()
	k, _ := operatortest.Cluster(t)
	return clients(t, k.RESTConfig())
}

func clients(t *testing.T, cfg *rest.Config) *env {
	t.Helper()
	cs, dc := testenv.Clients(t, cfg)
	return &env{cfg: cfg, cs: cs, dc: dc}
}

// namespace creates a lease namespace of its own for the test.
func (e *env) namespace(t *testing.T) string {
	t.Helper()
	return testenv.Cluster(t).Namespace(t)
}

// testProvider is the test's own provider address: tests share the cluster, and an
// operator routes every ProviderHost of its provider.
func testProvider(t *testing.T) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return fmt.Sprintf("akash1test%x", sum[:8])
}

// testConfig is an ingress-mode configuration for provider.
func testConfig(provider string) Config {
	c := DefaultConfig()
	c.Provider, c.ChainID, c.Listen = provider, testChain, "127.0.0.1:0"
	c.LeaderElection.Disabled = true
	return c
}

var replicas atomic.Int32

// start runs an operator until the test ends; the returned function stops it early
// and returns Run's error.
func (e *env) start(t *testing.T, cfg Config, ns string) (stop func() error) {
	t.Helper()
	_, stop = e.startReplica(t, cfg, ns)
	return stop
}

// startReplica is start, also returning the replica's leader-election identity.
func (e *env) startReplica(t *testing.T, cfg Config, ns string) (identity string, stop func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(cfg, NewMetrics(reg), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	le := cfg.LeaderElection.WithDefaults("hostname-test")
	if !le.Disabled {
		le.Namespace = ns
	}
	identity = fmt.Sprintf("replica-%d", replicas.Add(1))
	_, stop = operatortest.Start(t, e.cfg, operator.Options{Name: "hostname", LeaderElection: le, Resync: cfg.Resync, Registry: reg,
		Identity: identity}, c)
	return identity, stop
}

// lease is a lease of provider's for the tests.
func lease(provider string, dseq uint64) market.LeaseID {
	return market.LeaseID{Owner: "akash1tenant", DSeq: dseq, GSeq: 1, OSeq: 1, Provider: provider}
}

// createHost creates a ProviderHost as the cluster service writes it.
func (e *env) createHost(t *testing.T, ns, name, hostname string, id market.LeaseID, edit ...func(*berthv1.ProviderHost)) *berthv1.ProviderHost {
	t.Helper()
	labels := ownership.LeaseLabels(id, testChain)
	labels["berth.dev/service"] = "web"
	h := &berthv1.ProviderHost{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "ProviderHost"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: berthv1.ProviderHostSpec{
			Lease:    berthv1.LeaseRef{Owner: id.Owner, DSeq: fmt.Sprint(id.DSeq), GSeq: 1, OSeq: 1, Provider: id.Provider},
			Hostname: hostname, Service: "web", ExternalPort: 80,
			ReadTimeout: 60000, SendTimeout: 30500, MaxBodySize: 1 << 20, NextTries: 3, NextCases: []string{"error", "timeout", "503"},
		},
	}
	for _, f := range edit {
		f(h)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(h)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	out, err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := asProviderHost(out)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *env) host(t *testing.T, ns, name string) (*berthv1.ProviderHost, error) {
	t.Helper()
	u, err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return asProviderHost(u)
}

// waitPhase waits for the ProviderHost's status phase.
func (e *env) waitPhase(t *testing.T, ns, name, phase string) *berthv1.ProviderHost {
	t.Helper()
	return e.waitPhaseSaying(t, ns, name, phase, "")
}

// waitPhaseSaying waits until the ProviderHost is in phase with a message containing
// saying (the probe's latest finding: a phase can be reached first for another reason,
// such as an ingress controller still reloading its routes).
func (e *env) waitPhaseSaying(t *testing.T, ns, name, phase, saying string) *berthv1.ProviderHost {
	t.Helper()
	var h *berthv1.ProviderHost
	testenv.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("ProviderHost %s/%s phase %s %q", ns, name, phase, saying), func() error {
		var err error
		if h, err = e.host(t, ns, name); err != nil {
			return err
		}
		if h.Status.Phase != phase || !strings.Contains(h.Status.Message, saying) {
			return fmt.Errorf("phase %q (%s)", h.Status.Phase, h.Status.Message)
		}
		return nil
	})
	return h
}

// waitIngress waits until the Ingress exists and check accepts it.
func (e *env) waitIngress(t *testing.T, ns, name string, check func(*networkingv1.Ingress) error) *networkingv1.Ingress {
	t.Helper()
	var ing *networkingv1.Ingress
	testenv.EventuallyNoError(t, 30*time.Second, "Ingress "+ns+"/"+name, func() error {
		var err error
		if ing, err = e.cs.NetworkingV1().Ingresses(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		if check != nil {
			return check(ing)
		}
		return nil
	})
	return ing
}

func (e *env) waitNoIngress(t *testing.T, ns, name string) {
	t.Helper()
	testenv.EventuallyNoError(t, 30*time.Second, "Ingress "+ns+"/"+name+" deleted", func() error {
		_, err := e.cs.NetworkingV1().Ingresses(ns).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return err
	})
}

// admit plays the ingress controller: it reports the Ingress's load-balancer address.
func (e *env) admit(t *testing.T, ns, name string) {
	t.Helper()
	ing, err := e.cs.NetworkingV1().Ingresses(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	if _, err := e.cs.NetworkingV1().Ingresses(ns).UpdateStatus(t.Context(), ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestIngressLifecycle: a ProviderHost becomes an Ingress as Akash's provider writes
// it (class, rule, backend, ingress-nginx annotations from the http_options), owned by
// the ProviderHost and labelled with its lease; the status follows the controller's
// admission; changes, hand edits and deletes of the Ingress converge; deleting the
// ProviderHost deletes its Ingress.
func TestIngressLifecycle(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Ingress.Class = "berth-test"
	e.start(t, cfg, ns)
	id := lease(prov, 1)
	h := e.createHost(t, ns, "web.example.test", "web.example.test", id, func(h *berthv1.ProviderHost) { h.Spec.ProxyBufferSize = 16384 })

	ing := e.waitIngress(t, ns, "web.example.test", nil)
	want := map[string]string{
		"nginx.ingress.kubernetes.io/proxy-read-timeout":          "60",
		"nginx.ingress.kubernetes.io/proxy-send-timeout":          "31",
		"nginx.ingress.kubernetes.io/proxy-body-size":             "1048576",
		"nginx.ingress.kubernetes.io/proxy-next-upstream-tries":   "3",
		"nginx.ingress.kubernetes.io/proxy-next-upstream-timeout": "0",
		"nginx.ingress.kubernetes.io/proxy-next-upstream":         "error timeout http_503",
		"nginx.ingress.kubernetes.io/proxy-buffer-size":           "16384",
		AnnotationHostname: "web.example.test",
	}
	for k, v := range want {
		if got := ing.Annotations[k]; got != v {
			t.Errorf("annotation %s = %q, want %q", k, got, v)
		}
	}
	if c := ing.Spec.IngressClassName; c == nil || *c != "berth-test" {
		t.Errorf("ingressClassName %v, want berth-test", c)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "web.example.test" {
		t.Fatalf("rules %+v", ing.Spec.Rules)
	}
	b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
	if b.Name != "web" || b.Port.Number != 80 {
		t.Errorf("backend %+v, want web:80", b)
	}
	if refs := ing.OwnerReferences; len(refs) != 1 || refs[0].UID != h.UID || refs[0].Kind != "ProviderHost" {
		t.Errorf("owner references %+v, want the ProviderHost", refs)
	}
	owner := ownership.Owner{Provider: prov, ChainID: testChain}
	if got, ok := owner.LeaseOf(ing.Labels); !ok || got != id {
		t.Errorf("labels %v name lease %v, want %v", ing.Labels, got, id)
	}
	if len(ing.Spec.TLS) != 0 {
		t.Errorf("TLS %+v without an issuer", ing.Spec.TLS)
	}

	// Health mode status: unready until the ingress controller admits it.
	got := e.waitPhase(t, ns, h.Name, berthv1.HostUnready)
	if !strings.Contains(got.Status.Message, "berth-test") || got.Status.Route != "Ingress/web.example.test" {
		t.Errorf("status %+v", got.Status)
	}
	e.admit(t, ns, "web.example.test")
	got = e.waitPhase(t, ns, h.Name, berthv1.HostReady)
	if !strings.Contains(got.Status.Message, "192.0.2.10") {
		t.Errorf("ready message %q does not name the address", got.Status.Message)
	}

	// The manifest changes its options: the annotations follow.
	patch := []byte(`{"spec":{"readTimeout":5000,"nextCases":["off"]}}`)
	if _, err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Patch(t.Context(), h.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, ns, "web.example.test", func(i *networkingv1.Ingress) error {
		if i.Annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "5" || i.Annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"] != "off" {
			return fmt.Errorf("annotations %v", i.Annotations)
		}
		return nil
	})

	// Someone edits the Ingress by hand: it converges back.
	ing, err := e.cs.NetworkingV1().Ingresses(ns).Get(t.Context(), "web.example.test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "elsewhere"
	ing.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"] = "0"
	if _, err := e.cs.NetworkingV1().Ingresses(ns).Update(t.Context(), ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, ns, "web.example.test", func(i *networkingv1.Ingress) error {
		if i.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "web" || i.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"] != "1048576" {
			return fmt.Errorf("not restored: backend %s, body size %q", i.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name, i.Annotations["nginx.ingress.kubernetes.io/proxy-body-size"])
		}
		return nil
	})
	// Someone deletes it: it comes back.
	old := ing.UID
	if err := e.cs.NetworkingV1().Ingresses(ns).Delete(t.Context(), "web.example.test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, ns, "web.example.test", func(i *networkingv1.Ingress) error {
		if i.UID == old {
			return errors.New("still the deleted one")
		}
		return nil
	})
	// A new Ingress has no status: unready again until admitted.
	e.waitPhase(t, ns, h.Name, berthv1.HostUnready)

	// The lease drops the hostname: its Ingress goes.
	if err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Delete(t.Context(), h.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitNoIngress(t, ns, "web.example.test")
}

// TestConflictAndMigration: one hostname, one lease. The oldest claimant holds it;
// a later one is reported in conflict and gets no route; when the holder lets go the
// next takes it (a hostname migrated between a tenant's deployments). Another
// provider's claim on the cluster counts, and its objects are never touched.
func TestConflictAndMigration(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	nsA, nsB, nsOther := e.namespace(t), e.namespace(t), e.namespace(t)
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	e.start(t, cfg, nsA)

	a := e.createHost(t, nsA, "shop.example.test", "shop.example.test", lease(prov, 10))
	e.waitPhase(t, nsA, a.Name, berthv1.HostRouted)
	b := e.createHost(t, nsB, "shop.example.test", "shop.example.test", lease(prov, 11))
	got := e.waitPhase(t, nsB, b.Name, berthv1.HostConflict)
	if strings.Contains(got.Status.Message, nsA) || strings.Contains(got.Status.Message, "akash1tenant") {
		t.Errorf("conflict message %q names the other lease", got.Status.Message)
	}
	if _, err := e.cs.NetworkingV1().Ingresses(nsB).Get(t.Context(), "shop.example.test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the conflicting lease has an Ingress (err %v)", err)
	}
	// Migration: the holder's ProviderHost goes, the other lease takes the name.
	if err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(nsA).Delete(t.Context(), a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitNoIngress(t, nsA, "shop.example.test")
	e.waitIngress(t, nsB, "shop.example.test", nil)
	e.waitPhase(t, nsB, b.Name, berthv1.HostRouted)

	// Another provider holds api.example.test (older), with its own operator's Ingress.
	other := lease("akash1otherprovider", 12)
	o := e.createHost(t, nsOther, "api.example.test", "api.example.test", other)
	theirs := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "api.example.test", Namespace: nsOther,
		Labels:      map[string]string{ownership.LabelManaged: "true", ownership.LabelProvider: other.Provider, ownership.LabelChainID: testChain, LabelComponent: componentName},
		Annotations: map[string]string{AnnotationHostname: "api.example.test"}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "theirs", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	if _, err := e.cs.NetworkingV1().Ingresses(nsOther).Create(t.Context(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Creation times have whole seconds, and nothing holds the name yet: ours comes a
	// second later, so theirs is the older.
	testenv.Eventually(t, 3*time.Second, "the next second", func() bool {
		return time.Now().Truncate(time.Second).After(o.CreationTimestamp.Time)
	})
	mine := e.createHost(t, nsA, "api.example.test", "api.example.test", lease(prov, 13))
	e.waitPhase(t, nsA, mine.Name, berthv1.HostConflict)
	// Ours has no Ingress; theirs is untouched, and so is their ProviderHost's status.
	if _, err := e.cs.NetworkingV1().Ingresses(nsA).Get(t.Context(), "api.example.test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an Ingress for a hostname another provider holds (err %v)", err)
	}
	ing, err := e.cs.NetworkingV1().Ingresses(nsOther).Get(t.Context(), "api.example.test", metav1.GetOptions{})
	if err != nil || ing.Spec.DefaultBackend.Service.Name != "theirs" || len(ing.Spec.Rules) != 0 {
		t.Fatalf("the other provider's Ingress was touched: %+v, %v", ing, err)
	}
	if h, err := e.host(t, nsOther, o.Name); err != nil || h.Status.Phase != "" {
		t.Fatalf("the other provider's ProviderHost status was written: %+v, %v", h, err)
	}
}

// TestWildcardHostname: a wildcard hostname is routed under a DNS-safe object name,
// and an exact name under it is another hostname (no conflict).
func TestWildcardHostname(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	e.start(t, cfg, ns)
	w := e.createHost(t, ns, "host-0123456789abcdef", "*.wild.example.test", lease(prov, 20))
	exact := e.createHost(t, ns, "a.wild.example.test", "a.wild.example.test", lease(prov, 20))
	ing := e.waitIngress(t, ns, w.Name, nil)
	if ing.Spec.Rules[0].Host != "*.wild.example.test" || ing.Annotations[AnnotationHostname] != "*.wild.example.test" {
		t.Errorf("wildcard Ingress: host %q, annotation %q", ing.Spec.Rules[0].Host, ing.Annotations[AnnotationHostname])
	}
	e.waitPhase(t, ns, w.Name, berthv1.HostRouted)
	e.waitPhase(t, ns, exact.Name, berthv1.HostRouted)
}

// TestTLSWithCertManager: with an issuer, tenants' own domains get a TLS section and
// cert-manager's annotation; the provider's own hostnames do not.
func TestTLSWithCertManager(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	cfg.TLS.Issuer, cfg.IngressDomain = "letsencrypt", "ingress.example.test"
	e.start(t, cfg, ns)
	custom := e.createHost(t, ns, "shop.tenant.test", "shop.tenant.test", lease(prov, 30))
	own := e.createHost(t, ns, "abc.ingress.example.test", "abc.ingress.example.test", lease(prov, 30))
	ing := e.waitIngress(t, ns, custom.Name, nil)
	if ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" || len(ing.Spec.TLS) != 1 ||
		ing.Spec.TLS[0].SecretName != "shop.tenant.test-tls" || ing.Spec.TLS[0].Hosts[0] != "shop.tenant.test" {
		t.Errorf("custom domain: annotations %v, TLS %+v", ing.Annotations, ing.Spec.TLS)
	}
	ing = e.waitIngress(t, ns, own.Name, nil)
	if _, ok := ing.Annotations["cert-manager.io/cluster-issuer"]; ok || len(ing.Spec.TLS) != 0 {
		t.Errorf("provider hostname: annotations %v, TLS %+v", ing.Annotations, ing.Spec.TLS)
	}
}

// gatewayAPIOnce installs the Gateway API's standard CRDs, from the module berth
// builds with, on the shared cluster.
var gatewayAPIOnce sync.Once

func installGatewayAPI(t *testing.T, e *env) {
	t.Helper()
	gatewayAPIOnce.Do(func() {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
		dir := strings.TrimSpace(string(out))
		if err != nil || dir == "" {
			t.Fatalf("find the sigs.k8s.io/gateway-api module (go list -m): %v", err)
		}
		files := []string{"gateway.networking.k8s.io_gatewayclasses.yaml", "gateway.networking.k8s.io_gateways.yaml",
			"gateway.networking.k8s.io_httproutes.yaml", "gateway.networking.k8s.io_referencegrants.yaml"}
		if err := kube.ApplyCRDs(t.Context(), e.dc, os.DirFS(filepath.Join(dir, "config", "crd", "standard")), files...); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGatewayMode: in gateway mode a ProviderHost becomes an HTTPRoute attached to
// the configured Gateway, with NGINX Gateway Fabric's annotations; it is ready once
// the gateway accepts it, and goes with its ProviderHost.
func TestGatewayMode(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	installGatewayAPI(t, e)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Mode = ModeGateway
	cfg.Gateway = GatewayConfig{Name: "public", Namespace: "gateways", SectionName: "http", Annotations: AnnotationsNginx}
	e.start(t, cfg, ns)
	h := e.createHost(t, ns, "gw.example.test", "gw.example.test", lease(prov, 40))
	routes := e.dc.Resource(HTTPRouteResource).Namespace(ns)
	var route *unstructured.Unstructured
	testenv.EventuallyNoError(t, 30*time.Second, "HTTPRoute", func() error {
		var err error
		route, err = routes.Get(t.Context(), h.Name, metav1.GetOptions{})
		return err
	})
	host, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if len(host) != 1 || host[0] != "gw.example.test" || len(parents) != 1 || len(rules) != 1 {
		t.Fatalf("HTTPRoute spec %v", route.Object["spec"])
	}
	p, _ := parents[0].(map[string]any)
	if p["name"] != "public" || p["namespace"] != "gateways" || p["sectionName"] != "http" {
		t.Errorf("parentRef %v", p)
	}
	rule, _ := rules[0].(map[string]any)
	backends, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	if len(backends) != 1 {
		t.Fatalf("backendRefs %v", backends)
	}
	backend, _ := backends[0].(map[string]any)
	if backend["name"] != "web" || backend["port"] != int64(80) {
		t.Errorf("backendRef %v", backend)
	}
	if a := route.GetAnnotations(); a["nginx.org/client-max-body-size"] != "1048576" || a["nginx.org/proxy-read-timeout"] != "60" || a["nginx.org/proxy-next-upstream"] != "error timeout http_503" {
		t.Errorf("annotations %v", a)
	}
	e.waitPhase(t, ns, h.Name, berthv1.HostUnready)

	// The gateway accepts it.
	status := map[string]any{"parents": []any{map[string]any{
		"controllerName": "example.test/gateway",
		"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "gateways", "sectionName": "http"},
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": route.GetGeneration()}},
	}}}
	route.Object["status"] = status
	if _, err := routes.UpdateStatus(t.Context(), route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPhase(t, ns, h.Name, berthv1.HostReady)
	if err := e.dc.Resource(berthv1.ProviderHostResource).Namespace(ns).Delete(t.Context(), h.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "HTTPRoute deleted", func() error {
		if _, err := routes.Get(t.Context(), h.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

// TestGatewayModeNeedsCRDs: gateway mode on a cluster without the Gateway API says
// so instead of waiting forever.
func TestGatewayModeNeedsCRDs(t *testing.T) {
	prov := testProvider(t)
	k := testenv.Cluster(t)
	e := clients(t, k.RESTConfig())
	cfg := testConfig(prov)
	cfg.Mode, cfg.Gateway = ModeGateway, GatewayConfig{Name: "g", Namespace: "gw", Annotations: AnnotationsNone}
	c, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The shared cluster may have the CRDs from TestGatewayMode: check discovery's
	// answer the way Run does.
	err = c.checkResources(e.cs.Discovery())
	_, derr := e.cs.Discovery().ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
	switch {
	case derr != nil && err == nil:
		t.Fatal("no Gateway API on the cluster, and Run would start anyway")
	case derr != nil && !strings.Contains(err.Error(), "install the Gateway API CRDs"):
		t.Fatalf("error %q does not say what to install", err)
	case derr == nil && err != nil:
		t.Fatalf("Gateway API installed, but: %v", err)
	}
}

// TestLeaderElectionAndRestart: two replicas, one leads; hostnames created while the
// leader (whichever it is, by the Lease) is stopped mid-work are routed by the standby
// when it takes over, and the Lease then names the standby.
func TestLeaderElectionAndRestart(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	cfg.LeaderElection = operator.LeaderElection{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	idA, stopA := e.startReplica(t, cfg, ns)
	idB, stopB := e.startReplica(t, cfg, ns)
	first := e.createHost(t, ns, "one.example.test", "one.example.test", lease(prov, 50))
	e.waitPhase(t, ns, first.Name, berthv1.HostRouted)
	holder := func() string {
		l, err := e.cs.CoordinationV1().Leases(ns).Get(t.Context(), "hostname-test", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	stopLeader, stopStandby, standby := stopA, stopB, idB
	switch h := holder(); h {
	case idA:
	case idB:
		stopLeader, stopStandby, standby = stopB, stopA, idA
	default:
		t.Fatalf("the Lease is held by %q, neither replica (%s, %s)", h, idA, idB)
	}
	// Stop the leader in the middle of a burst of new hostnames.
	for i := range 20 {
		e.createHost(t, ns, fmt.Sprintf("burst-%d.example.test", i), fmt.Sprintf("burst-%d.example.test", i), lease(prov, 51))
		if i == 5 {
			if err := stopLeader(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 20 {
		e.waitPhase(t, ns, fmt.Sprintf("burst-%d.example.test", i), berthv1.HostRouted)
	}
	if h := holder(); h != standby {
		t.Errorf("after the leader stopped and the burst was routed, the Lease is held by %q, want the standby %s", h, standby)
	}
	if err := stopStandby(); err != nil {
		t.Fatal(err)
	}
}

// TestAPIServerOutage: the operator rides out an API server restart and converges
// what changed meanwhile.
func TestAPIServerOutage(t *testing.T) {
	prov := testProvider(t)
	bin, err := localenv.FindBinaries(t.Context())
	testenv.Require(t, err)
	cp, err := localenv.StartControlPlane(t.Context(), localenv.ControlPlaneOptions{BinDir: bin,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	e := clients(t, cp.RESTConfig())
	if err := kube.InstallCRDs(t.Context(), e.dc); err != nil {
		t.Fatal(err)
	}
	ns := "lease-outage"
	if _, err := e.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	e.start(t, cfg, ns)
	before := e.createHost(t, ns, "before.example.test", "before.example.test", lease(prov, 60))
	e.waitPhase(t, ns, before.Name, berthv1.HostRouted)
	if err := cp.RestartAPIServer(t.Context(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	after := e.createHost(t, ns, "after.example.test", "after.example.test", lease(prov, 60))
	e.waitPhase(t, ns, after.Name, berthv1.HostRouted)
	if err := e.cs.NetworkingV1().Ingresses(ns).Delete(t.Context(), before.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, ns, before.Name, nil)
}

// TestModeSwitch: an operator restarted in the other mode replaces its routes: the
// Ingresses go, HTTPRoutes come (and back).
func TestModeSwitch(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	installGatewayAPI(t, e)
	ns := e.namespace(t)
	cfg := testConfig(prov)
	cfg.Health.Mode = HealthNone
	stop := e.start(t, cfg, ns)
	h := e.createHost(t, ns, "switch.example.test", "switch.example.test", lease(prov, 70))
	e.waitIngress(t, ns, h.Name, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	gw := cfg
	gw.Mode, gw.Gateway = ModeGateway, GatewayConfig{Name: "public", Namespace: "gateways", Annotations: AnnotationsNone}
	stop = e.start(t, gw, ns)
	e.waitNoIngress(t, ns, h.Name)
	routes := e.dc.Resource(HTTPRouteResource).Namespace(ns)
	testenv.EventuallyNoError(t, 30*time.Second, "HTTPRoute", func() error {
		_, err := routes.Get(t.Context(), h.Name, metav1.GetOptions{})
		return err
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e.start(t, cfg, ns)
	e.waitIngress(t, ns, h.Name, nil)
	testenv.EventuallyNoError(t, 30*time.Second, "HTTPRoute deleted", func() error {
		if _, err := routes.Get(t.Context(), h.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
}

// asProviderHost converts a ProviderHost read through the dynamic client.
func asProviderHost(u *unstructured.Unstructured) (*berthv1.ProviderHost, error) {
	h := &berthv1.ProviderHost{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, h); err != nil {
		return nil, fmt.Errorf("ProviderHost %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return h, nil
}
