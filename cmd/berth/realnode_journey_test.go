package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/dev"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/testenv"
)

// TestRealNodeJourney is a tenant's journey on `berth dev --real-node`, where the
// container really runs: deploy examples/echo.yaml → bid → lease → manifest → the
// container's own HTTP answer through the ingress controller, for the provider's
// hostname and the tenant's accept host → its request line in `lease logs` → `lease
// shell` reads what only exists in the container → a manifest update rolls the pod →
// close → namespace and containers gone; then an image from the registry, a volume kept
// across a restart and an update, and a service evicted past its ephemeral storage.
func TestRealNodeJourney(t *testing.T) {
	t.Parallel() // see TestMain
	requireRealNode(t)

	home := filepath.Join(t.TempDir(), "home")
	banner := startDev(t, "--home", home, "--real-node")
	routes := regexp.MustCompile(`HTTP routes +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(banner)
	socket := regexp.MustCompile(`ctr --address (\S+) `).FindStringSubmatch(banner)
	registry := regexp.MustCompile(`registry +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(banner)
	if routes == nil || socket == nil || registry == nil || !strings.Contains(banner, "tenant deploy examples/echo.yaml") {
		t.Fatalf("the banner does not say where routes answer, how to import an image, or what to deploy:\n%s", banner)
	}
	ingress := routes[1]
	cli, must := cliWith(t, "--home", home)
	cs := devKube(t, home)
	ctx := t.Context()

	sdlFile := filepath.Join("..", "..", "examples", "echo.yaml")
	res := deployOne(t, home, sdlFile)
	lease := res.Leases[0].ID
	dseq := strconv.FormatUint(res.DSeq, 10)
	ns := kube.LeaseNamespace(lease)
	providerHost := deploy.IngressHost(lease, "echo", dev.IngressDomain)
	// The lease status gives the ingress's port, which tenant deploy adds to its URLs.
	_, port, _ := strings.Cut(ingress, ":")
	if got := res.Leases[0].Status.Berth.IngressHTTPPort; strconv.Itoa(got) != port {
		t.Errorf("lease status ingress_http_port = %d, want the ingress controller's %s", got, port)
	}

	// The container's own answer, through Traefik, by either hostname.
	answer := func(host, path, want string) string {
		t.Helper()
		return waitAnswer(t, ingress, host, path, want)
	}
	first := answer(providerHost, "/", "GREETING=hello from a real container")
	answer("echo.example.test", "/", "GREETING=hello from a real container")
	pod := strings.TrimPrefix(strings.SplitN(first, "\n", 2)[0], "hostname: ")

	// The ingress controller killed: berth dev restarts it at the same address. containerd
	// killed: restarted, the container still runs and answers, and the node still execs
	// in it (below).
	for _, p := range []struct{ name, arg string }{
		{"traefik", "--entryPoints.web.address=" + ingress},
		{"containerd", filepath.Join(home, "cluster")},
	} {
		killed := killProcess(t, p.name, p.arg)
		answer(providerHost, "/", "GREETING=hello from a real container")
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

	checkTerminal(t, home, dseq)
	checkRestart(t, home, cs, dseq, ns, pod)
	answer(providerHost, "/", "GREETING=hello from a real container")
	checkIsolation(t, home, ingress, cs, dseq)
	checkServiceNames(t, home, ingress, cs, dseq)
	checkOOMKill(t, home, ingress, cs, dseq, ns, pod, providerHost)

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
	if second := answer(providerHost, "/", "GREETING=updated in place"); strings.Contains(second, "hostname: "+pod+"\n") {
		t.Errorf("the update answered from the old pod %s", pod)
	}

	// Close: the namespace goes, and with it the containers.
	closeLease(t, must, cs, dseq, ns)
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

	// An image pushed to berth dev's registry: the node pulls it for the lease.
	images, err := localenv.FindImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An image of its own, as a tenant's is: one whose config equals an image the
	// node imported shares its ID, and containerd 1.6's CRI, restarted (above), then
	// stops resolving the imported name (docs/cluster.md).
	img := localenv.EchoImage("x/echo:pushed", images)
	img.Env = append(img.Env, "BUILT_AS=pushed")
	pushed, err := localenv.Push(ctx, registry[1], "tenant/echo", "pushed", "", "", img)
	if err != nil {
		t.Fatal(err)
	}
	pushedFile := filepath.Join(t.TempDir(), "echo-pushed.yaml")
	if err := os.WriteFile(pushedFile, []byte(strings.NewReplacer(dev.EchoImageRef, pushed, "echo.example.test", "pushed.example.test").Replace(string(sdlData))), 0o600); err != nil {
		t.Fatal(err)
	}
	pushedRes := deployOne(t, home, pushedFile)
	pushedLease := pushedRes.Leases[0].ID
	answer(deploy.IngressHost(pushedLease, "echo", dev.IngressDomain), "/", "BUILT_AS=pushed")
	closeLease(t, must, cs, strconv.FormatUint(pushedRes.DSeq, 10), kube.LeaseNamespace(pushedLease))
	checkCredentials(t, home, ingress, cs, images, string(sdlData))

	// A persistent volume keeps the service's data across a restart of its pod and a
	// manifest update; close deletes it, data and all.
	dataFile := filepath.Join("..", "..", "examples", "echo-data.yaml")
	dataRes := deployOne(t, home, dataFile)
	dataLease := dataRes.Leases[0].ID
	dataDSeq, dataNS := strconv.FormatUint(dataRes.DSeq, 10), kube.LeaseNamespace(dataLease)
	dataHost := deploy.IngressHost(dataLease, "echo", dev.IngressDomain)
	answer(dataHost, "/data", "start ")
	if _, err := askHost(ctx, ingress, dataHost, http.MethodPost, "/data", "a note kept on the volume"); err != nil {
		t.Fatal(err)
	}
	// dataAfter waits for /data to show the note and n starts of the container: the
	// replaced pod answers until it has stopped.
	dataAfter := func(n int, when string) {
		t.Helper()
		testenv.EventuallyNoError(t, time.Minute, fmt.Sprintf("/data with the note and %d starts %s", n, when), func() error {
			body, err := askHost(ctx, ingress, dataHost, http.MethodGet, "/data", "")
			if err != nil {
				return err
			}
			if got := strings.Count("\n"+body, "\nstart "); got != n || !strings.Contains(body, "a note kept on the volume") {
				return fmt.Errorf("/data shows %d start(s), want %d, and the note:\n%s", got, n, body)
			}
			return nil
		})
	}
	pods, err := cs.CoreV1().Pods(dataNS).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of %s: %v (%d)", dataNS, err, len(pods.Items))
	}
	if err := cs.CoreV1().Pods(dataNS).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dataAfter(2, "after the pod's restart")
	dataSDL, err := os.ReadFile(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	updatedData := filepath.Join(t.TempDir(), "echo-data-updated.yaml")
	if err := os.WriteFile(updatedData, []byte(strings.Replace(string(dataSDL), "- DATA_DIR=/data", "- DATA_DIR=/data\n      - UPDATED=yes", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	must("tenant", "deployment", "update", updatedData, dataDSeq)
	answer(dataHost, "/", "UPDATED=yes")
	dataAfter(3, "after the manifest update")
	closeLease(t, must, cs, dataDSeq, dataNS)
	checkEphemeralLimit(t, home, ingress, cs)
	testenv.EventuallyNoError(t, time.Minute, "the volume's data removed", func() error {
		left, err := filepath.Glob(filepath.Join(home, "cluster", "volumes", "pvc-*"))
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("volumes left: %v", left)
		}
		return nil
	})
}

// checkRestart: the container's process ends (SIGTERM to its process 1, which echo
// handles by exiting): the kubelet restarts it in the same pod, and `lease logs
// --previous` reads the run that ended, with the request it served.
func checkRestart(t *testing.T, home string, cs kubernetes.Interface, dseq, ns, pod string) {
	t.Helper()
	cli, must := cliWith(t, "--home", home)
	// The shell's own exit status may be lost with the container it runs in: what is
	// checked is the restart.
	_, _ = cli("tenant", "lease", "shell", dseq, "--service", "echo", "--", "kill", "1")
	testenv.EventuallyNoError(t, time.Minute, "the container restarted and ready", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("%d container statuses", len(p.Status.ContainerStatuses))
		}
		if c := p.Status.ContainerStatuses[0]; c.RestartCount != 1 || !c.Ready {
			return fmt.Errorf("container %s: %d restarts, ready %t", c.Name, c.RestartCount, c.Ready)
		}
		return nil
	})
	previous := must("tenant", "lease", "logs", dseq, "--previous")
	if !strings.Contains(previous, "echo: GET / from") || !strings.Contains(previous, "["+pod+"] echo: listening on :8080") {
		t.Errorf("lease logs --previous lacks the ended run's lines:\n%s", previous)
	}
	if _, err := cli("tenant", "lease", "logs", dseq, "--previous", "--follow"); err == nil || !strings.Contains(err.Error(), "--previous, --follow") {
		t.Errorf("logs --previous --follow: %v, want refused", err)
	}
}

// checkTerminal: `lease shell --tty --stdin` from a terminal gives the command a
// terminal in the container of the local terminal's size, follows the terminal's
// resizes, and exits with the command's code. (The command may start before its
// terminal has a size: the size arrives as the first resize, as with kubectl exec.
// Each line typed asks again.)
func checkTerminal(t *testing.T, home, dseq string) {
	t.Helper()
	master, slave := openPTY(t)
	setTerminalSize(t, slave, 30, 100)
	var out testenv.Buffer
	root := newRootCommand(slog.New(slog.DiscardHandler))
	root.SetIn(slave)
	root.SetOut(&out)
	root.SetErr(&out)
	// Each line typed prints the terminal's size as the container's tty has it; q ends
	// with 7.
	root.SetArgs([]string{"tenant", "lease", "shell", dseq, "--service", "echo", "--tty", "--stdin", "--home", home, "--",
		"sh", "-c", `[ -t 0 ] && echo "a tty"; while read x; do [ "$x" = q ] && exit 7; echo "size $(stty size)"; done`})
	var shellErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		shellErr = root.ExecuteContext(t.Context())
	}()
	// sized types a line (every half second at most) until the shell reports want as
	// its terminal's size.
	sized := func(want string) {
		t.Helper()
		var typed time.Time
		testenv.EventuallyNoError(t, 30*time.Second, "the container's tty at "+want, func() error {
			select {
			case <-finished:
				t.Fatalf("the shell ended early: %v\n%s", shellErr, out.String())
			default:
			}
			if printed := out.String(); strings.Contains(printed, "a tty") && strings.Contains(printed, "size "+want) {
				return nil
			}
			if time.Since(typed) > 500*time.Millisecond {
				if _, err := master.WriteString("\r"); err != nil {
					t.Fatal(err)
				}
				typed = time.Now()
			}
			return fmt.Errorf("the shell printed %q", out.String())
		})
	}
	sized("30 100")
	// The window resized: the CLI hears SIGWINCH and sends the new size.
	setTerminalSize(t, slave, 40, 120)
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	sized("40 120")
	if _, err := master.WriteString("q\r"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
		if exitCode(shellErr) != 7 {
			t.Errorf("the terminal shell ended with %v (code %d), want code 7\n%s", shellErr, exitCode(shellErr), out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the terminal shell did not end on q:\n%s", out.String())
	}
}

// checkOOMKill: the container's process asks for more memory than the service's
// 128Mi: the kernel kills it at the limit, the kubelet restarts it, and the lease's
// status and events say so.
func checkOOMKill(t *testing.T, home, ingress string, cs kubernetes.Interface, dseq, ns, pod, host string) {
	t.Helper()
	ctx := t.Context()
	cli, _ := cliWith(t, "--home", home)
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: %v", pod, err)
	}
	restarts := p.Status.ContainerStatuses[0].RestartCount
	// The request dies with the process: its answer is not what is checked.
	_, _ = askHost(ctx, ingress, host, http.MethodPost, "/memory?mib=256", "")
	testenv.EventuallyNoError(t, time.Minute, "the container killed out of memory and restarted", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := p.Status.ContainerStatuses[0]
		if last := c.LastTerminationState.Terminated; c.RestartCount != restarts+1 || last == nil || last.Reason != "OOMKilled" || !c.Ready {
			return fmt.Errorf("container %s: %d restarts, last ended %+v, ready %t", c.Name, c.RestartCount, last, c.Ready)
		}
		return nil
	})
	testenv.EventuallyNoError(t, 30*time.Second, "the kill in the lease's status and events", func() error {
		status, err := cli("tenant", "lease", "status", dseq)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("restarts %d; last exit: OOMKilled, code 137, %s/echo at ", restarts+1, pod); !strings.Contains(status, want) {
			return fmt.Errorf("the status lacks %q:\n%s", want, status)
		}
		events, err := cli("tenant", "lease", "events", dseq)
		if err != nil {
			return err
		}
		if want := "pod/" + pod + ": container echo was killed at its memory limit of 128Mi (out of memory, exit code 137)"; !strings.Contains(events, want) {
			return fmt.Errorf("the events lack %q:\n%s", want, events)
		}
		return nil
	})
}

// checkCredentials: an image in a registry that refuses anonymous pulls runs from an
// SDL whose credentials name the registry's account: berth's own image pull secret,
// end to end.
func checkCredentials(t *testing.T, home, ingress string, cs kubernetes.Interface, images, echoSDL string) {
	t.Helper()
	ctx := t.Context()
	_, must := cliWith(t, "--home", home)
	const user, password = "tenant", "a-registry-password"
	reg, err := localenv.StartRegistry(ctx, localenv.RegistryOptions{Dir: t.TempDir(), Users: map[string]string{user: password}, Restart: localenv.RestartPolicy{Max: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	// berth dev's node pulls from it over plain HTTP, as from berth dev's registry.
	if err := localenv.TrustRegistryAt(filepath.Join(home, "cluster", "node-"+localenv.DefaultRealNodeName), reg.Addr); err != nil {
		t.Fatal(err)
	}
	img := localenv.EchoImage("x/echo:private", images)
	img.Env = append(img.Env, "BUILT_AS=private")
	ref, err := localenv.Push(ctx, reg.Addr, "tenant/echo", "private", user, password, img)
	if err != nil {
		t.Fatal(err)
	}
	// Without the account the registry refuses it.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+reg.Addr+"/v2/tenant/echo/manifests/private", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous pull from the private registry: %s, want 401", resp.Status)
	}
	sdl := strings.NewReplacer(dev.EchoImageRef, ref, "echo.example.test", "private.example.test").Replace(echoSDL)
	sdl = strings.Replace(sdl, "    image: "+ref+"\n", fmt.Sprintf("    image: %s\n    credentials:\n      host: %s\n      username: %s\n      password: %s\n", ref, reg.Addr, user, password), 1)
	if !strings.Contains(sdl, "credentials:") {
		t.Fatalf("no credentials put in the SDL:\n%s", sdl)
	}
	file := filepath.Join(t.TempDir(), "echo-private.yaml")
	if err := os.WriteFile(file, []byte(sdl), 0o600); err != nil {
		t.Fatal(err)
	}
	res := deployOne(t, home, file)
	ns := kube.LeaseNamespace(res.Leases[0].ID)
	testenv.EventuallyNoError(t, time.Minute, "the private image answering", func() error {
		b, err := askHost(ctx, ingress, "private.example.test", http.MethodGet, "/", "")
		if err == nil && !strings.Contains(b, "BUILT_AS=private") {
			err = fmt.Errorf("answered %q", b)
		}
		return err
	})
	// The pod pulled with berth's pull secret, and the password is in no event.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Spec.ImagePullSecrets) != 1 {
		t.Fatalf("the private image's pod: %v, want one pod with one pull secret", err)
	}
	if events := must("tenant", "lease", "events", strconv.FormatUint(res.DSeq, 10)); strings.Contains(events, password) {
		t.Errorf("the lease's events show the registry password:\n%s", events)
	}
	closeLease(t, must, cs, strconv.FormatUint(res.DSeq, 10), ns)
}

// checkIsolation: the NetworkPolicies berth writes isolate leases on the real node (its
// NetworkPolicy controller enforces them): a second lease's pod and Service refuse
// lease dseqA's pod, and answer their own lease's pod and the ingress controller.
func checkIsolation(t *testing.T, home, ingress string, cs kubernetes.Interface, dseqA string) {
	t.Helper()
	ctx := t.Context()
	cli, must := cliWith(t, "--home", home)
	sdlData, err := os.ReadFile(filepath.Join("..", "..", "examples", "echo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "echo-b.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(sdlData), "echo.example.test", "b.example.test")), 0o600); err != nil {
		t.Fatal(err)
	}
	res := deployOne(t, home, file)
	dseqB, nsB := strconv.FormatUint(res.DSeq, 10), kube.LeaseNamespace(res.Leases[0].ID)
	pods, err := cs.CoreV1().Pods(nsB).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("lease B's pod: %v (%d)", err, len(pods.Items))
	}
	svc, err := cs.CoreV1().Services(nsB).Get(ctx, "echo", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP == "" || len(svc.Spec.Ports) == 0 {
		t.Fatalf("lease B's Service echo: %v", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(nsB).Get(ctx, "default-deny", metav1.GetOptions{}); err != nil {
		t.Fatalf("lease B's default-deny NetworkPolicy: %v", err)
	}
	// get asks addr from a lease's shell: HTTP over busybox's nc; the answer, or the
	// shell's error.
	get := func(dseq, host string, port int32) (string, error) {
		return cli("tenant", "lease", "shell", dseq, "--service", "echo", "--", "sh", "-c",
			fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 %s %d`, host, port))
	}
	podB := pods.Items[0].Status.PodIP
	// B's own pod reaches it: the policies allow the namespace.
	if out, err := get(dseqB, podB, 8080); err != nil || !strings.Contains(out, "hostname: "+pods.Items[0].Name) {
		t.Errorf("lease B's pod asking itself at %s:8080: %v %q", podB, err, out)
	}
	// A's pod does not, at B's pod or its Service: the policy controller REJECTs the
	// connection to a port that is listening (B reached it above). kube-router covers a
	// new pod once it has seen it: a moment after B's pod started.
	testenv.EventuallyNoError(t, 30*time.Second, "lease A refused by lease B's pod and Service", func() error {
		for _, to := range []struct {
			host string
			port int32
		}{{podB, 8080}, {svc.Spec.ClusterIP, svc.Spec.Ports[0].Port}} {
			out, err := get(dseqA, to.host, to.port)
			if err == nil {
				return fmt.Errorf("lease A asking lease B at %s:%d succeeded: %q", to.host, to.port, out)
			}
			if strings.Contains(out, "hostname:") || !strings.Contains(out, "Connection refused") {
				return fmt.Errorf("lease A asking lease B at %s:%d: %w: %q, want the connection refused", to.host, to.port, err, out)
			}
		}
		return nil
	})
	// The ingress controller (this machine) still reaches B.
	testenv.EventuallyNoError(t, time.Minute, "lease B through the ingress", func() error {
		b, err := askHost(ctx, ingress, "b.example.test", http.MethodGet, "/", "")
		if err == nil && !strings.Contains(b, "hostname: "+pods.Items[0].Name) {
			err = fmt.Errorf("answered %q", b)
		}
		return err
	})
	closeLease(t, must, cs, dseqB, nsB)
}

// checkServiceNames: examples/echo-pair.yaml's web reaches its api by the service's
// name, through the cluster DNS (which lease pods may ask: berth's allow-dns policy),
// and lease dseqA's pod, which resolves the same Service by its namespace, is refused.
func checkServiceNames(t *testing.T, home, ingress string, cs kubernetes.Interface, dseqA string) {
	t.Helper()
	cli, must := cliWith(t, "--home", home)
	res := deployOne(t, home, filepath.Join("..", "..", "examples", "echo-pair.yaml"))
	dseq, ns := strconv.FormatUint(res.DSeq, 10), kube.LeaseNamespace(res.Leases[0].ID)
	waitAnswer(t, ingress, "pair.example.test", "/", "ROLE=web")
	// (busybox 1.35's wget -T crashes: timeout bounds it instead.)
	if out := must("tenant", "lease", "shell", dseq, "--service", "web", "--", "timeout", "10", "wget", "-q", "-O-", "http://api:8080/"); !strings.Contains(out, "ROLE=api") || !strings.Contains(out, "hostname: api-") {
		t.Errorf("web asking http://api:8080/ got %q, want api's answer", out)
	}
	testenv.EventuallyNoError(t, 30*time.Second, "lease A refused by the pair's api", func() error {
		out, err := cli("tenant", "lease", "shell", dseqA, "--service", "echo", "--", "timeout", "10", "wget", "-q", "-O-", "http://api."+ns+":8080/")
		if err == nil || !strings.Contains(out, "Connection refused") {
			return fmt.Errorf("lease A asking http://api.%s:8080/: %w %q, want the connection refused", ns, err, out)
		}
		return nil
	})
	closeLease(t, must, cs, dseq, ns)
}

// checkEphemeralLimit: a service whose container writes past its SDL storage size (its
// ephemeral-storage limit) is evicted by the kubelet, which the lease's events say, and
// its Deployment's new pod serves in its place.
func checkEphemeralLimit(t *testing.T, home, ingress string, cs kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	cli, must := cliWith(t, "--home", home)
	sdlData, err := os.ReadFile(filepath.Join("..", "..", "examples", "echo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small := regexp.MustCompile(`size: 512Mi.*`).ReplaceAllString(string(sdlData), "size: 64Mi")
	small = strings.ReplaceAll(small, "echo.example.test", "disk.example.test")
	if !strings.Contains(small, "size: 64Mi") {
		t.Fatal("examples/echo.yaml no longer asks for 512Mi of storage: update this test")
	}
	file := filepath.Join(t.TempDir(), "echo-64mi.yaml")
	if err := os.WriteFile(file, []byte(small), 0o600); err != nil {
		t.Fatal(err)
	}
	res := deployOne(t, home, file)
	dseq, ns := strconv.FormatUint(res.DSeq, 10), kube.LeaseNamespace(res.Leases[0].ID)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of %s: %v (%d)", ns, err, len(pods.Items))
	}
	first := pods.Items[0].Name
	// 100 MiB in the container's own file system: past its 64 MiB limit.
	must("tenant", "lease", "shell", dseq, "--service", "echo", "--", "dd", "if=/dev/zero", "of=/tmp/fill", "bs=1048576", "count=100")
	testenv.EventuallyNoError(t, 2*time.Minute, "the kubelet's eviction in the lease's events", func() error {
		events, err := cli("tenant", "lease", "events", dseq)
		if err == nil && !strings.Contains(events, "pod/"+first+": Pod ephemeral local storage usage exceeds the total limit of containers 64Mi") {
			err = fmt.Errorf("no eviction of %s in the events:\n%s", first, events)
		}
		return err
	})
	testenv.EventuallyNoError(t, time.Minute, "a new pod answering", func() error {
		b, err := askHost(ctx, ingress, "disk.example.test", http.MethodGet, "/", "")
		if err == nil && (strings.Contains(b, "hostname: "+first+"\n") || !strings.Contains(b, "hostname: echo-")) {
			err = fmt.Errorf("answered %q", b)
		}
		return err
	})
	closeLease(t, must, cs, dseq, ns)
}

// requireRealNode skips the test (fails it with CI=true) unless berth dev can run a
// real node here: root, containerd and the rest, the binaries, images, NetworkPolicy
// controller and ingress controller built.
func requireRealNode(t *testing.T) {
	t.Helper()
	bin, err := localenv.FindBinaries(t.Context())
	testenv.Require(t, err)
	testenv.Require(t, localenv.CheckRealNodeHost(bin))
	for _, find := range []func(context.Context) (string, error){localenv.FindImages, localenv.FindNetworkPolicy, localenv.FindDNS, localenv.FindIngressController, localenv.FindRegistry} {
		_, err := find(t.Context())
		testenv.Require(t, err)
	}
}

// waitAnswer waits up to a minute for the ingress controller at ingress to answer GET
// path for host with a 200 whose body holds want, and returns that body.
func waitAnswer(t *testing.T, ingress, host, path, want string) string {
	t.Helper()
	var body string
	testenv.EventuallyNoError(t, time.Minute, host+path+" answering with "+want, func() error {
		b, err := askHost(t.Context(), ingress, host, http.MethodGet, path, "")
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

// deployOne deploys file as home's tenant and returns the result of its one lease,
// which must be ready.
func deployOne(t *testing.T, home, file string) deployResult {
	t.Helper()
	out, progress, err := runSplit(t, "tenant", "deploy", file, "-o", "json", "--home", home)
	if err != nil {
		t.Fatalf("deploy %s: %v\n%s%s", file, err, progress, out)
	}
	var res deployResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Leases) != 1 || !res.Leases[0].Status.Berth.Ready {
		t.Fatalf("deploy %s: want one ready lease (%v):\n%s", file, err, out)
	}
	return res
}

// closeLease closes the deployment dseq and waits for its namespace to go.
func closeLease(t *testing.T, must func(...string) string, cs kubernetes.Interface, dseq, ns string) {
	t.Helper()
	must("tenant", "close", dseq)
	testenv.Eventually(t, 2*time.Minute, "namespace "+ns+" gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
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

// askHost sends method path (with body, if any) to the ingress controller at addr for
// host, and returns the answer of a 200.
func askHost(ctx context.Context, addr, host, method, path, body string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
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
		return "", fmt.Errorf("%s %s for %s: %s: %s", method, path, host, resp.Status, b)
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
