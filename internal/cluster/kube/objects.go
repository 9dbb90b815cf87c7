package kube

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/ownership"
)

// LabelService names the manifest service an object belongs to.
const LabelService = "berth.dev/service"

// TenantServiceAccount is the service account every pod of a lease runs as: it has no
// permissions and no API token is mounted.
const TenantServiceAccount = "tenant"

// Settings are the provider's choices for how leases run.
type Settings struct {
	// Owner is the provider and chain the lease objects belong to (their labels).
	Owner ownership.Owner
	// StorageClasses maps an SDL persistent storage class to the cluster's StorageClass
	// (absent: the same name).
	StorageClasses map[string]string
	// GPURuntimeClass, when set, is the runtimeClassName of pods with GPUs.
	GPURuntimeClass string
	// IngressNamespace is where the ingress controller runs (default ingress-nginx).
	IngressNamespace string
	// EgressDeny lists the CIDRs tenants may not reach (default: private, shared,
	// link-local and loopback ranges); everything else on the internet is allowed.
	EgressDeny []string
	// Overcommit lowers requests below limits (the bid engine reserves the same way).
	Overcommit cluster.Overcommit
	// StorageAffinity places pods with persistent volumes on nodes labelled as able to
	// use their StorageClass (inventory.StorageLabel: the inventory operator labels
	// the nodes of each class it offers; set with inventory.operator).
	StorageAffinity bool
}

// DefaultEgressDeny are the ranges tenants' pods cannot reach by default.
var DefaultEgressDeny = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"}

func (s Settings) withDefaults() Settings {
	if s.IngressNamespace == "" {
		s.IngressNamespace = "ingress-nginx"
	}
	if s.EgressDeny == nil {
		s.EgressDeny = DefaultEgressDeny
	}
	return s
}

// LeaseObjects are the Kubernetes objects of one lease, in the order they are applied.
type LeaseObjects struct {
	Namespace       *corev1.Namespace
	ServiceAccount  *corev1.ServiceAccount
	NetworkPolicies []*networkingv1.NetworkPolicy
	Secrets         []*corev1.Secret
	Deployments     []*appsv1.Deployment
	StatefulSets    []*appsv1.StatefulSet
	Services        []*corev1.Service
	// Hosts are the hostnames the lease's HTTP ports accept (the hostname operator
	// routes them); LeasedIPs its ports on leased IPs (the IP operator assigns them).
	Hosts     []*berthv1.ProviderHost
	LeasedIPs []*berthv1.ProviderLeasedIP
}

// leaseNamespacePrefix starts every lease namespace's name.
const leaseNamespacePrefix = "lease-"

// LeaseNamespace is the namespace of a lease: "lease-" and 32 characters of the base32
// SHA-256 of its ID, stable and a valid DNS label.
func LeaseNamespace(id market.LeaseID) string {
	sum := sha256.Sum256([]byte(id.String()))
	return leaseNamespacePrefix + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:32]
}

// BuildLease turns a lease's manifest group into its objects.
func BuildLease(id market.LeaseID, group market.ManifestGroup, s Settings) (*LeaseObjects, error) {
	s = s.withDefaults()
	ns := LeaseNamespace(id)
	labels := s.Owner.LeaseLabels(id)
	meta := func(name string, extra ...string) metav1.ObjectMeta {
		l := make(map[string]string, len(labels)+len(extra)/2)
		for k, v := range labels {
			l[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}
	}
	nsMeta := meta(ns)
	nsMeta.Namespace = ""
	objs := &LeaseObjects{
		Namespace:      &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: nsMeta},
		ServiceAccount: &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(TenantServiceAccount), AutomountServiceAccountToken: new(bool)},
	}
	objs.NetworkPolicies = networkPolicies(meta, group, s)
	for i := range group.Services {
		svc := &group.Services[i]
		if err := buildService(objs, meta, svc, s); err != nil {
			return nil, fmt.Errorf("service %s: %w", svc.Name, err)
		}
	}
	return objs, nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

type metaFunc func(name string, extra ...string) metav1.ObjectMeta

func buildService(objs *LeaseObjects, meta metaFunc, svc *market.Service, s Settings) error {
	selector := map[string]string{ownership.LabelManaged: "true", LabelService: svc.Name}
	pod, claims, err := podSpec(svc, s)
	if err != nil {
		return err
	}
	// Claims made from the templates carry the lease's labels, so the inventory counts
	// their volumes against the lease's reservation rather than on top of it.
	for i := range claims {
		claims[i].Labels = meta("", LabelService, svc.Name).Labels
	}
	if c := svc.Credentials; c != nil {
		secret, err := pullSecret(meta(svc.Name+"-pull", LabelService, svc.Name), c)
		if err != nil {
			return err
		}
		objs.Secrets = append(objs.Secrets, secret)
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret.Name}}
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: meta("", LabelService, svc.Name), Spec: pod}
	tmpl.Namespace = ""
	replicas := int32(min(svc.Count, 1<<30))
	if len(claims) > 0 {
		objs.StatefulSets = append(objs.StatefulSets, &appsv1.StatefulSet{
			TypeMeta: typeMeta("apps/v1", "StatefulSet"), ObjectMeta: meta(svc.Name, LabelService, svc.Name),
			Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: tmpl,
				ServiceName: svc.Name, PodManagementPolicy: appsv1.ParallelPodManagement,
				VolumeClaimTemplates: claims,
			},
		})
	} else {
		zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
		// One old ReplicaSet kept (the version before, for a look or a rollback by
		// hand): manifest updates leave no pile of them behind (Kubernetes keeps 10).
		history := int32(1)
		objs.Deployments = append(objs.Deployments, &appsv1.Deployment{
			TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta(svc.Name, LabelService, svc.Name),
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: tmpl,
				RevisionHistoryLimit: &history,
				// No extra capacity during an update: replace one replica at a time.
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one}},
			},
		})
	}
	objs.Services = append(objs.Services, services(meta, svc, selector)...)
	ref := leaseRef(objs.Namespace.Labels)
	for i := range svc.Expose {
		e := &svc.Expose[i]
		ext := int32(min(e.ExternalPortOrPort(), 65535))
		if e.IsIngress() {
			// manifest.Validate keeps it in range; the CRD would refuse more.
			o := &e.HTTPOptions
			pbs := o.ProxyBufferSize
			if pbs > market.MaxProxyBufferSize {
				return fmt.Errorf("port %d: proxy buffer size %d is over the limit of %d bytes", e.Port, pbs, market.MaxProxyBufferSize)
			}
			for _, h := range e.Hosts {
				name := strings.ToLower(h)
				if len(validation.IsDNS1123Subdomain(name)) > 0 { // a wildcard, for one
					sum := sha256.Sum256([]byte(name))
					name = fmt.Sprintf("host-%x", sum[:8])
				}
				objs.Hosts = append(objs.Hosts, &berthv1.ProviderHost{
					TypeMeta: typeMeta(berthv1.GroupVersion.String(), "ProviderHost"), ObjectMeta: meta(name, LabelService, svc.Name),
					Spec: berthv1.ProviderHostSpec{Lease: ref, Hostname: strings.ToLower(h), Service: svc.Name, ExternalPort: ext,
						ProxyBufferSize: int32(pbs), ReadTimeout: int64(o.ReadTimeout), SendTimeout: int64(o.SendTimeout),
						MaxBodySize: int64(o.MaxBodySize), NextTries: int64(o.NextTries), NextTimeout: int64(o.NextTimeout),
						NextCases: slices.Clone(o.NextCases)},
				})
			}
		}
		if e.Global && e.IP != "" {
			proto := string(protocol(e.Proto))
			objs.LeasedIPs = append(objs.LeasedIPs, &berthv1.ProviderLeasedIP{
				TypeMeta:   typeMeta(berthv1.GroupVersion.String(), "ProviderLeasedIP"),
				ObjectMeta: meta(fmt.Sprintf("%s-%s-%d", svc.Name, strings.ToLower(proto), ext), LabelService, svc.Name),
				Spec: berthv1.ProviderLeasedIPSpec{Lease: ref, Name: e.IP, Service: svc.Name,
					Port: int32(min(e.Port, 65535)), ExternalPort: ext, Protocol: proto},
			})
		}
	}
	return nil
}

// leaseRef is the lease a namespace's labels name.
func leaseRef(labels map[string]string) berthv1.LeaseRef {
	id, _ := ownership.LeaseFromLabels(labels)
	return berthv1.LeaseRef{Owner: id.Owner, DSeq: fmt.Sprint(id.DSeq), GSeq: int64(id.GSeq), OSeq: int64(id.OSeq), Provider: id.Provider}
}

// podSpec builds a service's pod, and the volume claims when it has persistent storage.
func podSpec(svc *market.Service, s Settings) (corev1.PodSpec, []corev1.PersistentVolumeClaim, error) {
	res := svc.Resources
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	oc := s.Overcommit
	if res.CPU != nil {
		limit := int64(min(uint64(res.CPU.Units.Val), 1<<53))
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(cluster.Request(limit, oc.CPU), resource.DecimalSI)
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(limit, resource.DecimalSI)
	}
	st, err := storageOf(svc, s)
	if err != nil {
		return corev1.PodSpec{}, nil, err
	}
	memory := st.ram
	if res.Memory != nil {
		memory += int64(min(uint64(res.Memory.Size.Val), 1<<53))
	}
	if memory > 0 {
		requests[corev1.ResourceMemory] = *resource.NewQuantity(cluster.Request(memory, oc.Memory), resource.BinarySI)
		limits[corev1.ResourceMemory] = *resource.NewQuantity(memory, resource.BinarySI)
	}
	if st.ephemeral > 0 {
		requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(cluster.Request(st.ephemeral, oc.Storage), resource.BinarySI)
		limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(st.ephemeral, resource.BinarySI)
	}
	var affinity *corev1.Affinity
	var tolerations []corev1.Toleration
	runtimeClass := ""
	if res.GPU != nil && res.GPU.Units.Val > 0 {
		q := *resource.NewQuantity(int64(min(uint64(res.GPU.Units.Val), 1<<20)), resource.DecimalSI)
		requests[ResourceGPU], limits[ResourceGPU] = q, q
		alts, err := gpu.ParseAttributes(res.GPU.Attributes)
		if err != nil {
			return corev1.PodSpec{}, nil, err
		}
		affinity = gpuAffinity(alts)
		runtimeClass = s.GPURuntimeClass
		// GPU node pools of managed Kubernetes are tainted for GPU workloads.
		tolerations = []corev1.Toleration{{Key: inventory.TaintGPU, Operator: corev1.TolerationOpExists}}
	}
	if s.StorageAffinity {
		affinity = withStorageAffinity(affinity, st.claims)
	}
	env, err := envVars(svc.Env)
	if err != nil {
		return corev1.PodSpec{}, nil, err
	}
	no := false
	pod := corev1.PodSpec{
		ServiceAccountName:           TenantServiceAccount,
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		Affinity:                     affinity,
		Tolerations:                  tolerations,
		Volumes:                      st.volumes,
		Containers: []corev1.Container{{
			Name: svc.Name, Image: svc.Image, Command: svc.Command, Args: svc.Args, Env: env, Ports: containerPorts(svc),
			Resources:    corev1.ResourceRequirements{Requests: requests, Limits: limits},
			VolumeMounts: st.mounts,
			SecurityContext: &corev1.SecurityContext{
				Privileged: &no, AllowPrivilegeEscalation: &no,
			},
		}},
	}
	if runtimeClass != "" {
		pod.RuntimeClassName = &runtimeClass
	}
	return pod, st.claims, nil
}

// podStorage is what a service's storage makes of its pod: volumes and their mounts,
// claims for the persistent ones, and the bytes counted as ephemeral storage and
// (RAM volumes) as memory.
type podStorage struct {
	volumes        []corev1.Volume
	mounts         []corev1.VolumeMount
	claims         []corev1.PersistentVolumeClaim
	ephemeral, ram int64
}

// storageOf maps a service's storage: RAM volumes to memory-backed emptyDirs (which
// must be mounted), persistent ones to claims of their class (mapped by
// cluster.storage_classes), the rest to ephemeral storage (an emptyDir when mounted).
func storageOf(svc *market.Service, s Settings) (podStorage, error) {
	mounts := map[string]market.StorageParams{}
	if svc.Params != nil {
		for _, p := range svc.Params.Storage {
			mounts[p.Name] = p
		}
	}
	var out podStorage
	for _, st := range svc.Resources.Storage {
		size := int64(min(uint64(st.Size.Val), 1<<53))
		class, _ := st.Attributes.Find(market.StorageAttributeClass)
		persistent, _ := st.Attributes.Find(market.StorageAttributePersistent)
		mount, mounted := mounts[st.Name]
		switch {
		case class == market.StorageClassRAM:
			// Memory-backed: counted in the container's memory.
			out.ram += size
			if !mounted {
				return podStorage{}, fmt.Errorf("ram volume %q is not mounted", st.Name)
			}
			q := resource.NewQuantity(size, resource.BinarySI)
			out.volumes = append(out.volumes, corev1.Volume{Name: st.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: q}}})
		case persistent == "true":
			if !mounted {
				return podStorage{}, fmt.Errorf("persistent volume %q is not mounted", st.Name)
			}
			if class == "" {
				class = market.StorageClassDefault
			}
			scName := class
			if mapped, ok := s.StorageClasses[class]; ok {
				scName = mapped
			}
			out.claims = append(out.claims, corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: st.Name},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: &scName, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
				},
			})
		default:
			out.ephemeral += size
			if mounted {
				q := resource.NewQuantity(size, resource.BinarySI)
				out.volumes = append(out.volumes, corev1.Volume{Name: st.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: q}}})
			}
		}
		if mounted {
			out.mounts = append(out.mounts, corev1.VolumeMount{Name: st.Name, MountPath: mount.Mount, ReadOnly: mount.ReadOnly})
		}
	}
	return out, nil
}

// containerPorts are a service's exposed ports, each port and protocol once.
func containerPorts(svc *market.Service) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	for i := range svc.Expose {
		e := &svc.Expose[i]
		p := corev1.ContainerPort{ContainerPort: int32(min(e.Port, 65535)), Protocol: protocol(e.Proto)}
		if !slices.ContainsFunc(ports, func(o corev1.ContainerPort) bool {
			return o.ContainerPort == p.ContainerPort && o.Protocol == p.Protocol
		}) {
			ports = append(ports, p)
		}
	}
	return ports
}

func protocol(p string) corev1.Protocol {
	if p == market.ProtoUDP {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

// envVars reads "NAME=value" entries (a name alone is an empty value).
func envVars(env []string) ([]corev1.EnvVar, error) {
	out := make([]corev1.EnvVar, 0, len(env))
	for i, e := range env {
		name, value, _ := strings.Cut(e, "=")
		if name == "" {
			return nil, fmt.Errorf("env[%d]: empty name", i)
		}
		out = append(out, corev1.EnvVar{Name: name, Value: value})
	}
	return out, nil
}

// services: a ClusterIP service with every port (how the lease's services reach each
// other and how the ingress reaches HTTP ports), and a NodePort service with the
// global ports that are not HTTP on 80.
func services(meta metaFunc, svc *market.Service, selector map[string]string) []*corev1.Service {
	var internal, global []corev1.ServicePort
	for i := range svc.Expose {
		e := &svc.Expose[i]
		ext := int32(min(e.ExternalPortOrPort(), 65535))
		target := intstr.FromInt32(int32(min(e.Port, 65535)))
		p := corev1.ServicePort{Name: portName(e.Proto, ext), Port: ext, TargetPort: target, Protocol: protocol(e.Proto)}
		if !slices.ContainsFunc(internal, func(o corev1.ServicePort) bool { return o.Name == p.Name }) {
			internal = append(internal, p)
		}
		if e.Global && !e.IsIngress() && !slices.ContainsFunc(global, func(o corev1.ServicePort) bool { return o.Name == p.Name }) {
			global = append(global, p)
		}
	}
	var out []*corev1.Service
	if len(internal) > 0 {
		out = append(out, &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta(svc.Name, LabelService, svc.Name),
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: selector, Ports: internal}})
	}
	if len(global) > 0 {
		out = append(out, &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta(svc.Name+"-np", LabelService, svc.Name),
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: selector, Ports: global}})
	}
	return out
}

func portName(proto string, port int32) string {
	return strings.ToLower(string(protocol(proto))) + "-" + fmt.Sprint(port)
}

// pullSecret is a dockerconfigjson secret for a service's registry credentials.
func pullSecret(meta metav1.ObjectMeta, c *market.ServiceCredentials) (*corev1.Secret, error) {
	if c.Host == "" || c.Username == "" || c.Password == "" {
		return nil, errors.New("image credentials need host, username and password")
	}
	cfg := map[string]map[string]map[string]string{"auths": {c.Host: {
		"username": c.Username, "password": c.Password, "email": c.Email,
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{TypeMeta: typeMeta("v1", "Secret"), ObjectMeta: meta, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: b}}, nil
}

// networkPolicies isolate a lease: nothing in or out by default; within the namespace
// allowed; DNS to kube-system; the internet except EgressDeny; in from the ingress
// controller; and in from anywhere to the global ports.
func networkPolicies(meta metaFunc, group market.ManifestGroup, s Settings) []*networkingv1.NetworkPolicy {
	all := metav1.LabelSelector{}
	np := func(name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		spec.PodSelector = all
		return &networkingv1.NetworkPolicy{TypeMeta: typeMeta("networking.k8s.io/v1", "NetworkPolicy"), ObjectMeta: meta(name), Spec: spec}
	}
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	nsSelector := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}
	}
	out := []*networkingv1.NetworkPolicy{
		np("default-deny", networkingv1.NetworkPolicySpec{PolicyTypes: append(ingress, egress...)}),
		np("allow-namespace", networkingv1.NetworkPolicySpec{PolicyTypes: append(ingress, egress...),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &all}}}},
			Egress:  []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &all}}}}}),
		np("allow-dns", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: nsSelector("kube-system")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
			}}}),
		np("allow-internet", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: s.EgressDeny}}}}}}),
		np("allow-ingress-controller", networkingv1.NetworkPolicySpec{PolicyTypes: ingress,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: nsSelector(s.IngressNamespace)}}}}}),
	}
	var global []networkingv1.NetworkPolicyPort
	for i := range group.Services {
		for j := range group.Services[i].Expose {
			e := &group.Services[i].Expose[j]
			if e.Global && !e.IsIngress() {
				p, port := protocol(e.Proto), intstr.FromInt32(int32(min(e.Port, 65535)))
				global = append(global, networkingv1.NetworkPolicyPort{Protocol: &p, Port: &port})
			}
		}
	}
	if len(global) > 0 {
		out = append(out, np("allow-global-ports", networkingv1.NetworkPolicySpec{PolicyTypes: ingress,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: global}}}))
	}
	return out
}

// withStorageAffinity adds to a pod's required node affinity (every term of it: terms
// are alternatives) that the node be labelled as able to use each of its claims'
// StorageClasses.
func withStorageAffinity(a *corev1.Affinity, claims []corev1.PersistentVolumeClaim) *corev1.Affinity {
	var reqs []corev1.NodeSelectorRequirement
	for i := range claims {
		c := &claims[i]
		if c.Spec.StorageClassName == nil {
			continue
		}
		r := corev1.NodeSelectorRequirement{Key: inventory.StorageLabel(*c.Spec.StorageClassName), Operator: corev1.NodeSelectorOpExists}
		if !slices.ContainsFunc(reqs, func(o corev1.NodeSelectorRequirement) bool { return o.Key == r.Key }) {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		return a
	}
	if a == nil {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
		}}}
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, reqs...)
	}
	return a
}

// gpuAffinity is the node affinity of a pod whose GPU may be any of alts: nodes with
// the capability labels the inventory operator keeps (inventory.GPUAffinity) of one of
// them — the model, and the memory and interface when the alternative names them. An
// alternative of any model ("*") leaves the choice to the nvidia.com/gpu request.
func gpuAffinity(alts []gpu.Model) *corev1.Affinity {
	var terms []corev1.NodeSelectorTerm
	for _, a := range alts {
		keys := inventory.GPUAffinity(a)
		if keys == nil {
			return nil
		}
		term := corev1.NodeSelectorTerm{}
		for _, k := range keys {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpExists})
		}
		if !slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool { return reflect.DeepEqual(t, term) }) {
			terms = append(terms, term)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}
