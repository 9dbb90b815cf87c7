package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/chartspec/charttest"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestChartOnRealNode installs charts/berth for real: `berth dev --real-node --chart`
// builds berth's image from a static build of this tree, pushes it to the dev registry
// and installs the chart, so the provider and the three operators run as pods under
// the chart's service accounts and roles, reaching the API server through the
// kubernetes Service and the ledger through the node. A tenant's deployment through
// that provider becomes ready and answers through the ingress controller; its logs and
// shell go through the provider pod; a volume claim is provisioned for a stateful
// service; the provider's pod, deleted, is replaced and serves again; close removes
// the lease's namespace.
func TestChartOnRealNode(t *testing.T) {
	requireRealNode(t)
	t.Setenv(localenv.HelmEnv, charttest.Helm(t))

	berth := buildStaticBerth(t)
	home := filepath.Join(t.TempDir(), "home")
	banner := startDev(t, "--home", home, "--real-node", "--chart", chartDir, "--chart-binary", berth)
	routes := regexp.MustCompile(`HTTP routes +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(banner)
	gateway := regexp.MustCompile(`provider +\S+ at (https://127\.0\.0\.1:\d+)\n`).FindStringSubmatch(banner)
	if routes == nil || gateway == nil || !strings.Contains(banner, "pods of Helm release "+dev.ChartRelease) {
		t.Fatalf("the banner does not say where routes answer, where the provider is, or that it runs in the cluster:\n%s", banner)
	}
	ingress := routes[1]
	cli, must := cliWith(t, "--home", home)
	cs := devKube(t, home)
	ctx := t.Context()

	// The provider and the operators are the chart's pods, of the image pushed, under
	// the chart's service accounts, not root.
	for _, name := range []string{"provider", "hostname-operator", "ip-operator", "inventory-operator"} {
		pod := releasePod(t, cs, name)
		c := pod.Spec.Containers[0]
		if !strings.Contains(c.Image, "127.0.0.1:") || !strings.Contains(c.Image, "/berth:") {
			t.Errorf("%s runs image %q, not berth's from the dev registry", pod.Name, c.Image)
		}
		if sa := pod.Spec.ServiceAccountName; sa != dev.ChartRelease+"-"+name {
			t.Errorf("%s runs as service account %q, want the chart's %s-%s", pod.Name, sa, dev.ChartRelease, name)
		}
		if u := pod.Spec.SecurityContext.RunAsUser; u == nil || *u == 0 {
			t.Errorf("%s runs as root", pod.Name)
		}
	}

	// A tenant's deployment through the in-cluster provider answers.
	sdlFile := filepath.Join("..", "..", "examples", "echo.yaml")
	res := deployOne(t, home, sdlFile)
	lease := res.Leases[0].ID
	dseq := strconv.FormatUint(res.DSeq, 10)
	answer := func(host, path, want string) {
		t.Helper()
		waitAnswer(t, ingress, host, path, want)
	}
	answer(deploy.IngressHost(lease, "echo", dev.IngressDomain), "/", "GREETING=hello from a real container")
	answer("echo.example.test", "/", "GREETING=hello from a real container")

	// Logs and a shell, through the provider's pod and its role.
	testenv.EventuallyNoError(t, 30*time.Second, "the request in the lease's logs", func() error {
		logs, err := cli("tenant", "lease", "logs", dseq, "--tail", "20")
		if err == nil && !strings.Contains(logs, "echo: GET / from") {
			err = fmt.Errorf("logs lack the request:\n%s", logs)
		}
		return err
	})
	if sh := must("tenant", "lease", "shell", dseq, "--service", "echo", "--", "cat", "/proc/1/cmdline"); !strings.Contains(sh, "/echo") {
		t.Errorf("shell: the container's process 1 is %q, want /echo", sh)
	}

	// A stateful service: its claim provisioned, its data kept.
	dataFile := filepath.Join("..", "..", "examples", "echo-data.yaml")
	dataRes := deployOne(t, home, dataFile)
	dataHost := deploy.IngressHost(dataRes.Leases[0].ID, "echo", dev.IngressDomain)
	if _, err := askHost(ctx, ingress, dataHost, http.MethodPost, "/data", "kept by the chart's provider"); err != nil {
		t.Fatal(err)
	}
	answer(dataHost, "/data", "kept by the chart's provider")

	// The provider's pod deleted: its Deployment replaces it, and the new one serves
	// the tenant (its home, the gateway's certificate, on the chart's volume).
	old := releasePod(t, cs, "provider")
	if err := cs.CoreV1().Pods(dev.ChartNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyNoError(t, 2*time.Minute, "a new provider pod serving the lease's status", func() error {
		p, err := runningPod(ctx, cs, "provider")
		switch {
		case err != nil:
			return err
		case p.Name == old.Name:
			return fmt.Errorf("still %s", old.Name)
		}
		st, err := cli("tenant", "lease", "status", dseq, "-o", "json")
		if err != nil {
			return err
		}
		var status struct {
			Berth struct{ Ready bool } `json:"berth"`
		}
		if err := json.Unmarshal([]byte(st), &status); err != nil {
			return fmt.Errorf("status: %w: %s", err, st)
		}
		if !status.Berth.Ready {
			return fmt.Errorf("status: not ready: %s", st)
		}
		return nil
	})

	closeLease(t, must, cs, dseq, kube.LeaseNamespace(lease))
	closeLease(t, must, cs, strconv.FormatUint(dataRes.DSeq, 10), kube.LeaseNamespace(dataRes.Leases[0].ID))
	if t.Failed() {
		t.Logf("the release's pods:\n%s", describeRelease(t, cs))
	}
}

// releasePod is the running pod of the release's component (provider,
// NAME-operator); it fails the test when there is none or more than one.
func releasePod(t *testing.T, cs kubernetes.Interface, component string) corev1.Pod {
	t.Helper()
	p, err := runningPod(t.Context(), cs, component)
	if err != nil {
		t.Fatalf("%v:\n%s", err, describeRelease(t, cs))
	}
	return p
}

// runningPod is the one running pod, not being deleted, of the release's component.
func runningPod(ctx context.Context, cs kubernetes.Interface, component string) (corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(dev.ChartNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=" + component, FieldSelector: "status.phase=Running"})
	if err != nil {
		return corev1.Pod{}, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return corev1.Pod{}, fmt.Errorf("%d running %s pods of the release, want 1", len(live), component)
	}
	return live[0], nil
}

// describeRelease lists the release's pods and their containers' states.
func describeRelease(t *testing.T, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods(dev.ChartNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s %s %v\n", p.Name, p.Status.Phase, p.Labels)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "    %s ready=%t restarts=%d %+v\n", c.Name, c.Ready, c.RestartCount, c.State)
		}
	}
	return b.String()
}

// buildStaticBerth builds this tree's berth without cgo, as make build does: the
// image's binary (the test binary itself is built with the race detector, which needs
// the C library).
func buildStaticBerth(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "berth")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (static): %v\n%s", err, b)
	}
	return out
}
