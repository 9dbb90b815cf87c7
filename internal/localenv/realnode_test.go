package localenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// requireDep ends the test when err is a missing dependency (skipped, failed with
// CI=true) or any other error (failed).
func requireDep(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrMissingDependency) && os.Getenv("CI") != "true" {
		t.Skipf("skipping: %v (with CI=true this fails)", err)
	}
	t.Fatal(err)
}

// TestRealNode runs a container on a real node (containerd, runc, the kubelet) and
// checks what kwok can only pretend: the process answers HTTP on its pod address and
// through a NodePort on loopback, its output is the pod's log through the API server,
// exec runs inside it, and Stop leaves nothing behind on this machine.
func TestRealNode(t *testing.T) {
	bin, err := FindBinaries(t.Context())
	requireDep(t, err)
	requireDep(t, CheckRealNodeHost(bin))
	images, err := FindImages(t.Context())
	requireDep(t, err)

	var logs syncBuffer
	cp, err := StartControlPlane(t.Context(), ControlPlaneOptions{BinDir: bin,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	node, err := cp.StartRealNode(t.Context(), RealNodeOptions{ImagesDir: images, Images: []Image{EchoImage("berth.local/echo:test", images)}})
	if err != nil {
		t.Fatalf("start the real node: %v\n%s", err, logs.String())
	}
	nodeDir := node.Dir
	defer func() {
		if t.Failed() {
			for _, name := range []string{"containerd", "kubelet", "kube-proxy"} {
				t.Logf("--- %s ---\n%s", name, cp.processLogTail(name))
			}
		}
	}()

	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu := n.Status.Capacity.Cpu().Value(); cpu < 1 {
		t.Errorf("node capacity cpu = %d, want the machine's", cpu)
	}
	if _, fake := n.Annotations[kwokNodeAnnotation]; fake {
		t.Error("the real node carries kwok's annotation")
	}

	ns := "real-node-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns, Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{
			NodeName:                     node.Name,
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name: "echo", Image: "berth.local/echo:test",
				Env:             []corev1.EnvVar{{Name: "GREETING", Value: "from-a-real-container"}},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				SecurityContext: &corev1.SecurityContext{Privileged: &no, AllowPrivilegeEscalation: &no},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP string
	eventually(t, time.Minute, "the echo pod ready", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				podIP = p.Status.PodIP
				return true
			}
		}
		return false
	})
	_, podNet, _ := net.ParseCIDR(node.PodCIDR)
	if ip := net.ParseIP(podIP); ip == nil || !podNet.Contains(ip) {
		t.Fatalf("pod IP %q is not in the real node's pod CIDR %s", podIP, node.PodCIDR)
	}

	// The container's own answer on its pod address (the pod's network namespace is
	// this test's, on the node's bridge).
	body := httpGet(t, "http://"+net.JoinHostPort(podIP, "8080")+"/")
	if !strings.Contains(body, "hostname: echo") || !strings.Contains(body, "GREETING=from-a-real-container") {
		t.Errorf("the container answered %q, want its hostname and environment", body)
	}

	// A NodePort on loopback, through kube-proxy's rules.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	created, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePort := created.Spec.Ports[0].NodePort
	eventually(t, 30*time.Second, "the NodePort answering on 127.0.0.1", func() bool {
		b, err := tryGet(ctx, "http://"+hostPort(int(nodePort))+"/")
		return err == nil && strings.Contains(b, "GREETING=from-a-real-container")
	})

	// The container's stdout is the pod's log.
	eventually(t, 10*time.Second, "the request in the pod's log", func() bool {
		b, err := cs.CoreV1().Pods(ns).GetLogs("echo", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "echo: GET / from")
	})

	// exec runs in the container: its root file system, not this machine's.
	out, errOut, err := execIn(ctx, cp, ns, "echo", "cat", "/etc/passwd")
	if err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, errOut)
	}
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	if out == string(hostPasswd) || !strings.Contains(out, "nobody") {
		t.Errorf("exec cat /etc/passwd = %q: not the image's file", out)
	}
	if _, _, err := execIn(ctx, cp, ns, "echo", "sh", "-c", "exit 7"); err == nil || !strings.Contains(err.Error(), "7") {
		t.Errorf("exec exit 7: err = %v, want the exit code", err)
	}

	checkClusterDNS(t, cp, cs, ns, created.Spec.ClusterIP)
	checkPodsReachHost(t, cp, node, ns, "echo")
	checkRegistryPulls(t, cs, node, ns, images)

	// What the node found, read once it held the machine's lock (another process's
	// node may have run until then); checked before the lock goes to the next one.
	before := maps.Clone(node.host.saved)
	node.teardown()
	defer node.Stop()
	if _, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after Stop the Node is still there (err %v)", err)
	}
	if left := leftovers(nodeDir, node.opts.Bridge, node.PodCIDR); len(left) > 0 {
		t.Errorf("Stop left behind:\n%s", strings.Join(left, "\n"))
	}
	if len(before) != 3 {
		t.Errorf("the node saved %d sysctls, want ip_forward, bridge-nf-call-iptables and route_localnet: %v", len(before), before)
	}
	for f, v := range before {
		if after, _ := os.ReadFile(f); strings.TrimSpace(string(after)) != v {
			t.Errorf("%s = %q after Stop, was %q", f, after, v)
		}
	}
}

// checkPodsReachHost: a pod reaches the API server at the kubernetes Service's address,
// and a loopback server at the address ExposeToPods gives, but no other loopback server.
func checkPodsReachHost(t *testing.T, cp *ControlPlane, node *RealNode, ns, pod string) {
	t.Helper()
	ctx := t.Context()
	// An HTTPS server told plain HTTP says so: the API server's Go TLS answers with 400.
	// (busybox's nc: Debian's busybox-static wget crashes, SIGSEGV, when given -T.)
	get := func(at netip.AddrPort) (string, string, error) {
		return execIn(ctx, cp, ns, pod, "sh", "-c", fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 %s %d`, at.Addr(), at.Port()))
	}
	out, errOut, err := get(netip.AddrPortFrom(kubernetesServiceIP(), 443))
	if err != nil || !strings.Contains(out, "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("a pod reaching the API server at the kubernetes Service: %v, answer %q (stderr %q)", err, out, errOut)
	}
	exposed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the host's server") }))
	defer exposed.Close()
	hidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "not for pods") }))
	defer hidden.Close()
	port := func(s *httptest.Server) int { return int(netip.MustParseAddrPort(s.Listener.Addr().String()).Port()) }
	at, err := node.ExposeToPods(ctx, port(exposed))
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := get(at); err != nil || !strings.HasSuffix(out, "\r\n\r\nthe host's server") {
		t.Errorf("a pod asking the exposed server at %s: %v, answer %q (stderr %q)", at, err, out, errOut)
	}
	hiddenAt := netip.AddrPortFrom(at.Addr(), uint16(port(hidden)))
	if out, _, err := get(hiddenAt); err == nil || out != "" {
		t.Errorf("a pod reached a loopback server nobody exposed, at %s: %q", hiddenAt, out)
	}
}

// TestCheckRangeUnused: a range overlapping an address of this machine is refused,
// naming the interface, unless that interface is the one to ignore.
func TestCheckRangeUnused(t *testing.T) {
	lo := netip.MustParsePrefix("127.64.0.0/16")
	if err := CheckRangeUnused(lo, ""); err == nil || !strings.Contains(err.Error(), "on lo") {
		t.Errorf("CheckRangeUnused(%s) = %v, want it refused for lo's 127.0.0.1/8", lo, err)
	}
	if err := CheckRangeUnused(lo, "lo"); err != nil {
		t.Errorf("CheckRangeUnused(%s, ignoring lo) = %v", lo, err)
	}
}

// checkRegistryPulls: an image pushed to a registry that wants a password is pulled by
// the node for a pod with the registry's credentials (an image pull secret, as berth
// writes for an SDL's credentials), and refused for a pod without them.
func checkRegistryPulls(t *testing.T, cs kubernetes.Interface, node *RealNode, ns, images string) {
	t.Helper()
	ctx := t.Context()
	bin, err := FindRegistry(ctx)
	requireDep(t, err)
	reg, err := StartRegistry(ctx, RegistryOptions{Dir: t.TempDir(), BinDir: bin, Users: map[string]string{"tenant": "s3cret"}, Restart: RestartPolicy{Max: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	if _, err := Push(ctx, reg.Addr, "tenant/echo", "1", "", "", EchoImage("x/echo:1", images)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a push without the password: err = %v, want 401", err)
	}
	withAuth, err := Push(ctx, reg.Addr, "tenant/echo", "1", "tenant", "s3cret", EchoImage("x/echo:1", images))
	if err != nil {
		t.Fatal(err)
	}
	noAuth, err := Push(ctx, reg.Addr, "tenant/echo", "2", "tenant", "s3cret", EchoImage("x/echo:2", images))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.TrustRegistry(reg.Addr); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("tenant:s3cret"))
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"username":"tenant","password":"s3cret","auth":%q}}}`, reg.Addr, auth)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfig)}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no := false
	pod := func(name, image string, secrets ...corev1.LocalObjectReference) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			NodeName: node.Name, AutomountServiceAccountToken: &no, ImagePullSecrets: secrets,
			Containers: []corev1.Container{{Name: "echo", Image: image}},
		}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("pulled", withAuth, corev1.LocalObjectReference{Name: "pull"})
	pod("refused", noAuth)
	eventually(t, time.Minute, "the pod with credentials running its pulled image", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "pulled", metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	eventually(t, time.Minute, "the pod without credentials refused its image", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "refused", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, "401")
	})
}

// leftovers lists what a stopped real node should have removed but did not.
func leftovers(dir, bridge, podCIDR string) []string {
	var left []string
	for pid, args := range Processes() {
		if s := strings.Join(args, " "); strings.Contains(s, dir) {
			left = append(left, fmt.Sprintf("process %d: %s", pid, s))
		}
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for line := range strings.SplitSeq(string(mounts), "\n") {
			if strings.Contains(line, dir) {
				left = append(left, "mount: "+line)
			}
		}
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		left = append(left, "bridge "+bridge)
	}
	if _, err := os.Stat(dir); err == nil {
		left = append(left, "directory "+dir)
	}
	if sets, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for name := range strings.FieldsSeq(string(sets)) {
			if hasPrefix(name, netpolSetPrefixes) {
				left = append(left, "ipset "+name)
			}
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		rules, _ := exec.Command(save).Output()
		for line := range strings.SplitSeq(string(rules), "\n") {
			if strings.Contains(line, podCIDR) || strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") {
				left = append(left, save+": "+line)
			}
		}
	}
	return left
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	b, err := tryGet(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tryGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return "", err
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), err
}

// execIn runs cmd in the pod's first container through the API server.
func execIn(ctx context.Context, cp *ControlPlane, ns, pod string, cmd ...string) (string, string, error) {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return "", "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cp.RESTConfig(), http.MethodPost, req.URL())
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}

// checkClusterDNS: the pod's name server is the cluster DNS, which resolves Services by
// their full name and, through the search path, by their short name; a name outside
// the cluster fails at once (nothing is forwarded off the machine).
func checkClusterDNS(t *testing.T, cp *ControlPlane, cs kubernetes.Interface, ns, echoIP string) {
	t.Helper()
	ctx := t.Context()
	conf, _, err := execIn(ctx, cp, ns, "echo", "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := "nameserver " + ClusterDNSIP().String(); !strings.Contains(conf, want) || strings.Count(conf, "nameserver") != 1 ||
		!strings.Contains(conf, "search "+ns+".svc.cluster.local svc.cluster.local cluster.local") {
		t.Errorf("the pod's resolv.conf:\n%s\nwant only %s and the cluster's search path", conf, want)
	}
	for _, name := range []string{"echo." + ns + ".svc.cluster.local", "kubernetes.default.svc.cluster.local"} {
		want := echoIP
		if strings.HasPrefix(name, "kubernetes.") {
			want = kubernetesServiceIP().String()
		}
		out, errOut, err := execIn(ctx, cp, ns, "echo", "nslookup", name)
		if err != nil || !strings.Contains(out, "Address: "+want) {
			t.Errorf("nslookup %s: %v %q %q, want %s", name, err, out, errOut, want)
		}
	}
	// By a name short of the cluster's domain, as a program resolves it (busybox's
	// wget: the C library's resolver, with the search path): the Service answers. (The
	// pod's own name, echo, is its /etc/hosts entry.)
	if out, errOut, err := execIn(ctx, cp, ns, "echo", "wget", "-q", "-O-", "http://echo."+ns+"/"); err != nil || !strings.Contains(out, "hostname: echo") {
		t.Errorf("wget http://echo.%s/: %v %q %q", ns, err, out, errOut)
	}
	start := time.Now()
	if out, _, err := execIn(ctx, cp, ns, "echo", "nslookup", "example.com"); err == nil {
		t.Errorf("nslookup example.com succeeded: %q; nothing outside the cluster resolves", out)
	}
	t.Logf("a name outside the cluster failed in %s", time.Since(start).Round(time.Millisecond))
	if ev, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=MissingClusterDNS"}); err != nil || len(ev.Items) > 0 {
		t.Errorf("the kubelet warns that it has no cluster DNS (%v): %d events", err, len(ev.Items))
	}
}
