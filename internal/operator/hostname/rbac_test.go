package hostname

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/operator/operatortest"
	"berth.dev/berth/internal/testenv"
)

const configDir = "../../../config/operators/hostname"

var kubeProviderHosts = berthv1.ProviderHostResource

// TestRBAC runs the operator as its service account with exactly config/operators/
// hostname/rbac.yaml's permissions, from the example configuration file: it elects a
// leader, routes a hostname in ingress mode and in gateway mode, reports a conflict
// and deletes routes, and nothing it asks is refused.
func TestRBAC(t *testing.T) {
	prov := testProvider(t)
	e := newEnv(t)
	installGatewayAPI(t, e)
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "namespace.yaml"))
	testenv.ApplyFile(t, e.dc, filepath.Join(configDir, "rbac.yaml"))
	rc := rest.CopyConfig(e.cfg)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:berth-system:berth-hostname-operator"}
	sa := clients(t, rc)

	file := operatortest.ExampleConfig(t, filepath.Join(configDir, "hostname-operator.yaml"), DecodeConfig)
	for _, mode := range []string{ModeIngress, ModeGateway} {
		t.Run(mode, func(t *testing.T) {
			cfg := file
			cfg.Provider, cfg.Listen = prov+mode[:1], "127.0.0.1:0"
			cfg.ChainID = testChain
			cfg.Health.Mode = HealthNone
			cfg.LeaderElection = operator.LeaderElection{Namespace: "berth-system", Name: "berth-hostname-rbac-" + mode}
			if mode == ModeGateway {
				cfg.Mode, cfg.Gateway = ModeGateway, GatewayConfig{Name: "public", Namespace: "gateways", Annotations: AnnotationsNginx}
			}
			stop := sa.start(t, cfg, "berth-system")
			ns := e.namespace(t)
			h := e.createHost(t, ns, "rbac.example.test", "rbac.example.test", lease(cfg.Provider, 1))
			e.waitPhase(t, ns, h.Name, berthv1.HostRouted)
			later := e.createHost(t, ns, "rbac-later", "rbac.example.test", lease(cfg.Provider, 2))
			e.waitPhase(t, ns, later.Name, berthv1.HostConflict)
			if err := e.dc.Resource(kubeProviderHosts).Namespace(ns).Delete(t.Context(), h.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.waitPhase(t, ns, later.Name, berthv1.HostRouted)
			if err := stop(); err != nil {
				t.Fatalf("operator as its service account: %v", err)
			}
			// The standby-free Lease was released on stop.
			l, err := e.cs.CoordinationV1().Leases("berth-system").Get(t.Context(), cfg.LeaderElection.Name, metav1.GetOptions{})
			if err != nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
				t.Errorf("Lease after stop: %+v, %v", l, err)
			}
		})
	}
	// What the role must not allow: another provider's route, or a Secret.
	_, err := sa.cs.CoreV1().Secrets("berth-system").List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the operator may list Secrets (err %v)", err)
	}
	_, err = sa.dc.Resource(kubeProviderHosts).Namespace("berth-system").Patch(t.Context(), "x", types.MergePatchType, []byte(`{"spec":{}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the operator may patch ProviderHosts' spec (err %v)", err)
	}
}

// TestExampleDeployment: the Deployment runs `berth operator hostname` with the
// ConfigMap's file, and probes the port the file listens on.
func TestExampleDeployment(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(configDir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"args: [operator, hostname, --config, /etc/berth/hostname-operator.yaml]", "mountPath: /etc/berth",
		"name: berth-hostname-operator-config", "containerPort: 8085", "path: /readyz", "path: /healthz", "serviceAccountName: berth-hostname-operator"} {
		if !strings.Contains(s, want) {
			t.Errorf("deployment.yaml lacks %q", want)
		}
	}
	k, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(k), "name: berth-hostname-operator-config") || !strings.Contains(string(k), "- hostname-operator.yaml") {
		t.Error("kustomization.yaml does not make the ConfigMap the Deployment mounts")
	}
	c, err := os.ReadFile(filepath.Join(configDir, "hostname-operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := DecodeConfig(c); err != nil || cfg.Listen != "0.0.0.0:8085" {
		t.Errorf("hostname-operator.yaml: listen %q, %v (the probes reach port 8085)", cfg.Listen, err)
	}
}
