package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/wait"
)

// DNSDirEnv names the environment variable holding hack/dns.sh's directory.
const DNSDirEnv = "BERTH_DNS"

// DNSImageRef is the cluster DNS image a real node imports (hack/dns.sh's CoreDNS).
const DNSImageRef = "berth.local/coredns:1"

// dnsFieldManager applies the cluster DNS's objects.
const dnsFieldManager = "berth-dev-node"

// FindDNS returns the directory with CoreDNS: $BERTH_DNS when set, otherwise the cache
// directory hack/dns.sh reports (without building anything).
func FindDNS(ctx context.Context) (string, error) {
	return findBuilt(ctx, DNSDirEnv, "dns.sh", "coredns")
}

// BuildDNS builds (or reuses) CoreDNS with hack/dns.sh, its progress to progress, and
// returns the directory FindDNS then finds.
func BuildDNS(ctx context.Context, progress io.Writer) (string, error) {
	if err := runHackScript(ctx, "dns.sh", "the cluster DNS", progress); err != nil {
		return "", err
	}
	return FindDNS(ctx)
}

// ClusterDNSIP is the kube-dns Service's cluster IP (ServiceCIDR's tenth address, as
// kubeadm has it), which the kubelet gives pods as their name server.
func ClusterDNSIP() netip.Addr {
	a := netip.MustParsePrefix(ServiceCIDR).Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// DNSImage is CoreDNS alone, at /coredns, with /etc/passwd naming the user it runs as.
func DNSImage(ref, dir string) Image {
	return Image{
		Ref: ref,
		Files: []ImageFile{
			{Path: "/coredns", Mode: 0o755, Source: filepath.Join(dir, "coredns")},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{"/coredns"},
		WorkingDir: "/",
	}
}

// corefile serves the cluster's zone from the API server and nothing else: no
// forwarding, so a name outside the cluster fails at once and no query leaves the
// machine. Only failures and names that do not exist are logged.
const corefile = `.:53 {
    errors
    log . {
        class denial error
    }
    health {
        lameduck 2s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods disabled
        ttl 30
    }
    cache 30
    reload
}
`

// clusterDNSObjects are kube-system's DNS, as kubeadm installs it: CoreDNS's service
// account and its read-only role (Services, EndpointSlices, namespaces), its Corefile,
// a Deployment of one replica pinned to the real node, and the kube-dns Service at
// ClusterDNSIP. CoreDNS runs as a user without privileges, which may bind port 53
// because the pod's own network namespace lets unprivileged users bind from 53 up.
func clusterDNSObjects(node string) []runtime.Object {
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns", "app.kubernetes.io/managed-by": dnsFieldManager}
	typed := func(kind, apiVersion, namespace, name string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}, metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}
	}
	sa := &corev1.ServiceAccount{}
	sa.TypeMeta, sa.ObjectMeta = typed("ServiceAccount", "v1", ns, name)
	role := &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	role.TypeMeta, role.ObjectMeta = typed("ClusterRole", "rbac.authorization.k8s.io/v1", "", "berth-dev:coredns")
	binding := &rbacv1.ClusterRoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	binding.TypeMeta, binding.ObjectMeta = typed("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "", "berth-dev:coredns")
	cm := &corev1.ConfigMap{Data: map[string]string{"Corefile": corefile}}
	cm.TypeMeta, cm.ObjectMeta = typed("ConfigMap", "v1", ns, name)

	nonroot, no, yes := int64(65532), false, true
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	probe := func(path string, port, period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures}
	}
	pod := corev1.PodSpec{
		ServiceAccountName: name,
		DNSPolicy:          corev1.DNSDefault,
		NodeSelector:       map[string]string{corev1.LabelHostname: node},
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &nonroot, RunAsGroup: &nonroot, RunAsNonRoot: &yes,
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}}},
		Containers: []corev1.Container{{
			Name: name, Image: DNSImageRef, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-conf", "/etc/coredns/Corefile"},
			Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: udp}, {Name: "dns-tcp", ContainerPort: 53, Protocol: tcp},
				{Name: "health", ContainerPort: 8080, Protocol: tcp}, {Name: "ready", ContainerPort: 8181, Protocol: tcp}},
			ReadinessProbe: probe("/ready", 8181, 1, 3),
			LivenessProbe:  probe("/health", 8080, 10, 5),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
	}
	replicas := int32(1)
	dep := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
	}}
	dep.TypeMeta, dep.ObjectMeta = typed("Deployment", "apps/v1", ns, name)
	svc := &corev1.Service{Spec: corev1.ServiceSpec{
		ClusterIP: ClusterDNSIP().String(),
		Selector:  map[string]string{"k8s-app": "kube-dns"},
		Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: udp, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: tcp, TargetPort: intstr.FromInt32(53)}},
	}}
	svc.TypeMeta, svc.ObjectMeta = typed("Service", "v1", ns, "kube-dns")
	return []runtime.Object{sa, role, binding, cm, dep, svc}
}

// startClusterDNS imports CoreDNS's image, applies the cluster DNS's objects (server-side:
// a node started again over the same control plane finds them and takes them over), and
// waits for the DNS to be ready, so that the node's first pods resolve names.
func (n *RealNode) startClusterDNS(ctx context.Context) error {
	n.log.InfoContext(ctx, "starting the cluster DNS (CoreDNS)", slog.String("service", ClusterDNSIP().String()))
	if err := n.ImportImages(ctx, DNSImage(DNSImageRef, n.opts.DNSDir)); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(n.cp.RESTConfig())
	if err != nil {
		return err
	}
	for _, o := range clusterDNSObjects(n.Name) {
		if err := applyTyped(ctx, dc, o); err != nil {
			return fmt.Errorf("cluster DNS: %w", err)
		}
	}
	// A changed Corefile or image of an earlier start: the pod is replaced.
	err = wait.Until(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1 {
			return nil
		}
		why := fmt.Sprintf("%d of 1 replica available", d.Status.AvailableReplicas)
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return fmt.Errorf("%s; its pods: %w", why, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			why += fmt.Sprintf("; pod %s %s", p.Name, p.Status.Phase)
			for j := range p.Status.ContainerStatuses {
				if w := p.Status.ContainerStatuses[j].State.Waiting; w != nil {
					why += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
				}
			}
		}
		return errors.New(why)
	})
	if err != nil {
		return fmt.Errorf("cluster DNS: the coredns Deployment in kube-system is not ready: %w", err)
	}
	return nil
}

// applyTyped server-side applies one of clusterDNSObjects' objects (its resource is
// its kind's plural).
func applyTyped(ctx context.Context, dc dynamic.Interface, o runtime.Object) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(o.GetObjectKind().GroupVersionKind())
	return apply(ctx, dc, gvr, dnsFieldManager, obj)
}
