package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestRealNodeJourney is a tenant's journey on `berth dev --real-node`, where the
// container really runs: deploy examples/echo.yaml → bid → lease → manifest → the
// container's own HTTP answer through the ingress controller, for the provider's
// hostname and the tenant's accept host → its request line in `lease logs` → `lease
// shell` reads what only exists in the container → a manifest update rolls the pod →
// close → namespace and containers gone.
func TestRealNodeJourney(t *testing.T) {
	bin, err := localenv.FindBinaries(t.Context())
	testenv.Require(t, err)
	testenv.Require(t, localenv.CheckRealNodeHost(bin))
	_, err = localenv.FindImages(t.Context())
	testenv.Require(t, err)
	_, err = localenv.FindIngressController(t.Context())
	testenv.Require(t, err)

	home := filepath.Join(t.TempDir(), "home")
	banner := startDev(t, "--home", home, "--real-node")
	routes := regexp.MustCompile(`HTTP routes +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(banner)
	socket := regexp.MustCompile(`ctr --address (\S+) `).FindStringSubmatch(banner)
	if routes == nil || socket == nil || !strings.Contains(banner, "tenant deploy examples/echo.yaml") {
		t.Fatalf("the banner does not say where routes answer, how to import an image, or what to deploy:\n%s", banner)
	}
	ingress := routes[1]
	cli, must := cliWith(t, "--home", home)
	cs := devKube(t, home)
	ctx := t.Context()

	sdlFile := filepath.Join("..", "..", "examples", "echo.yaml")
	out, progress, err := runSplit(t, "tenant", "deploy", sdlFile, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy: %v\n%s%s", err, progress, out)
	}
	var res deployResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Leases) != 1 || !res.Leases[0].Status.Berth.Ready {
		t.Fatalf("deploy: want one ready lease (%v):\n%s", err, out)
	}
	lease := res.Leases[0].ID
	dseq := strconv.FormatUint(res.DSeq, 10)
	ns := kube.LeaseNamespace(lease)
	providerHost := cluster.IngressHost(lease, "echo", dev.IngressDomain)
	// The lease status gives the ingress's port, which tenant deploy adds to its URLs.
	_, port, _ := strings.Cut(ingress, ":")
	if got := res.Leases[0].Status.Berth.IngressHTTPPort; strconv.Itoa(got) != port {
		t.Errorf("lease status ingress_http_port = %d, want the ingress controller's %s", got, port)
	}

	// The container's own answer, through Traefik, by either hostname.
	answer := func(host, want string) string {
		t.Helper()
		var body string
		testenv.EventuallyNoError(t, time.Minute, host+" answering with "+want, func() error {
			b, err := getHost(ctx, ingress, host)
			if err != nil {
				return err
			}
			if !strings.Contains(b, want) {
				return fmt.Errorf("%s answered %q", host, b)
			}
			body = b
			return nil
		})
		return body
	}
	first := answer(providerHost, "GREETING=hello from a real container")
	answer("echo.example.test", "GREETING=hello from a real container")
	pod := strings.TrimPrefix(strings.SplitN(first, "\n", 2)[0], "hostname: ")

	// The ingress controller killed: berth dev restarts it at the same address. containerd
	// killed: restarted, the container still runs and answers, and the node still execs
	// in it (below).
	for _, p := range []struct{ name, arg string }{
		{"traefik", "--entryPoints.web.address=" + ingress},
		{"containerd", filepath.Join(home, "cluster")},
	} {
		killed := killProcess(t, p.name, p.arg)
		answer(providerHost, "GREETING=hello from a real container")
		t.Logf("%s (pid %d) killed: answering again", p.name, killed)
	}

	// Its stdout, through the kubelet, is the lease's log.
	testenv.EventuallyNoError(t, 30*time.Second, "the request in the lease's logs", func() error {
		logs, err := cli("tenant", "lease", "logs", dseq, "--tail", "20")
		if err != nil {
			return err
		}
		if !strings.Contains(logs, "echo: GET / from") || !strings.Contains(logs, "echo: listening on :8080") {
			return fmt.Errorf("logs lack the container's lines:\n%s", logs)
		}
		return nil
	})

	// The shell runs in the container: its process 1 is echo, its hostname the pod's.
	if sh := must("tenant", "lease", "shell", dseq, "--service", "echo", "--", "cat", "/proc/1/cmdline"); !strings.Contains(sh, "/echo") {
		t.Errorf("shell: the container's process 1 is %q, want /echo", sh)
	}
	if sh := must("tenant", "lease", "shell", dseq, "--service", "echo", "--", "hostname"); strings.TrimSpace(sh) != pod {
		t.Errorf("shell: hostname %q, want the pod's %q", sh, pod)
	}
	if _, err := cli("tenant", "lease", "shell", dseq, "--service", "echo", "--", "sh", "-c", "exit 3"); err == nil {
		t.Error("shell: a command exiting 3 succeeded")
	}

	// A manifest update rolls the pod: a new one answers with the new environment.
	sdlData, err := os.ReadFile(sdlFile)
	if err != nil {
		t.Fatal(err)
	}
	updated := strings.Replace(string(sdlData), "GREETING=hello from a real container", "GREETING=updated in place", 1)
	updatedFile := filepath.Join(t.TempDir(), "echo-updated.yaml")
	if err := os.WriteFile(updatedFile, []byte(updated), 0o600); err != nil {
		t.Fatal(err)
	}
	must("tenant", "deployment", "update", updatedFile, dseq)
	if second := answer(providerHost, "GREETING=updated in place"); strings.Contains(second, "hostname: "+pod+"\n") {
		t.Errorf("the update answered from the old pod %s", pod)
	}

	// Close: the namespace goes, and with it the containers.
	must("tenant", "close", dseq)
	testenv.Eventually(t, 2*time.Minute, "the lease's namespace is gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	testenv.EventuallyNoError(t, time.Minute, "the lease's containers gone", func() error {
		out, err := exec.CommandContext(ctx, "ctr", "--address", socket[1], "-n", "k8s.io", "containers", "ls", "-q",
			fmt.Sprintf(`labels."io.kubernetes.pod.namespace"==%s`, ns)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr containers ls: %w: %s", err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("containers of %s remain: %s", ns, s)
		}
		return nil
	})
}

// killProcess SIGKILLs the one process whose program is name and whose command line
// holds arg, and returns its ID.
func killProcess(t *testing.T, name, arg string) int {
	t.Helper()
	var pids []int
	for pid, args := range localenv.Processes() {
		if filepath.Base(args[0]) == name && strings.Contains(strings.Join(args, " "), arg) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("%d %s processes with %q in their command line, want 1", len(pids), name, arg)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pids[0]
}

// getHost GETs / from the ingress controller at addr for host.
func getHost(ctx context.Context, addr, host string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", http.NoBody)
	if err != nil {
		return "", err
	}
	req.Host = host
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET / for %s: %s: %s", host, resp.Status, b)
	}
	return string(b), nil
}

// TestServiceURL: a URI's URL names the ingress's port unless it is HTTP's own.
func TestServiceURL(t *testing.T) {
	for _, tc := range []struct {
		port int
		want string
	}{{0, "http://a.example.test"}, {80, "http://a.example.test"}, {33797, "http://a.example.test:33797"}} {
		if got := serviceURL("a.example.test", tc.port); got != tc.want {
			t.Errorf("serviceURL(a.example.test, %d) = %q, want %q", tc.port, got, tc.want)
		}
	}
}
