package ip

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/ownership"
)

// MetalLB's Service annotations.
const (
	AnnotationSharedIP    = "metallb.io/allow-shared-ip"
	AnnotationAddressPool = "metallb.io/address-pool"
	AnnotationRequestIPs  = "metallb.io/loadBalancerIPs"
)

// AnnotationLeasedIP names, on each Service the operator writes, its ProviderLeasedIP.
const AnnotationLeasedIP = "berth.dev/leased-ip"

// LabelComponent marks the operator's Services.
const (
	LabelComponent = "berth.dev/component"
	componentName  = "ip-operator"
	// labelService is the deployer's label of a manifest service's pods.
	labelService = "berth.dev/service"
)

// FieldManager is the operator's server-side apply field manager.
const FieldManager = "berth-ip-operator"

// SharingKey is the MetalLB sharing key of one tenant's SDL IP endpoint on one
// provider and chain: the tenant's ports naming that endpoint, in any of its
// deployments, share one address; no two tenants (or providers) have the same key.
func SharingKey(owner ownership.Owner, tenant, endpoint string) string {
	sum := sha256.Sum256([]byte(owner.Provider + "\x00" + owner.ChainID + "\x00" + tenant + "\x00" + endpoint))
	return "berth-" + hex.EncodeToString(sum[:12])
}

// serviceName is the Service of a ProviderLeasedIP: its name and "-ip", or, when that
// is too long for a Service, a prefix of it and a hash.
func serviceName(plip string) string {
	n := plip + "-ip"
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(plip))
	return strings.TrimRight(plip[:40], "-.") + "-" + hex.EncodeToString(sum[:6]) + "-ip"
}

// buildService is p's LoadBalancer Service: the lease's pods of p's service, p's port,
// MetalLB's sharing key of p's tenant and endpoint; requestIP, when set, is the address
// the endpoint already has (another Service with the key holds it), asked for again so
// that the endpoint keeps its address.
func (c *Config) buildService(p *berthv1.ProviderLeasedIP, owner ownership.Owner, requestIP string) *corev1.Service {
	labels := map[string]string{LabelComponent: componentName}
	for k, v := range p.Labels {
		if strings.HasPrefix(k, "berth.dev/") {
			labels[k] = v
		}
	}
	annotations := map[string]string{
		AnnotationLeasedIP: p.Name,
		AnnotationSharedIP: SharingKey(owner, p.Spec.Lease.Owner, p.Spec.Name),
	}
	if c.Pool != "" {
		annotations[AnnotationAddressPool] = c.Pool
	}
	if requestIP != "" {
		annotations[AnnotationRequestIPs] = requestIP
	}
	proto := corev1.Protocol(p.Spec.Protocol)
	s := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: serviceName(p.Name), Namespace: p.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: berthv1.GroupVersion.String(), Kind: "ProviderLeasedIP", Name: p.Name, UID: p.UID, Controller: new(true),
			}},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{ownership.LabelManaged: "true", labelService: p.Spec.Service},
			Ports: []corev1.ServicePort{{
				Name: strings.ToLower(p.Spec.Protocol) + "-" + strconv.Itoa(int(p.Spec.ExternalPort)), Protocol: proto,
				Port: p.Spec.ExternalPort, TargetPort: intstr.FromInt32(p.Spec.Port),
			}},
			// MetalLB announces the address itself: no node ports are taken (the
			// provider counts those for tenants' global ports).
			AllocateLoadBalancerNodePorts: new(false),
		},
	}
	if c.LoadBalancerClass != "" {
		s.Spec.LoadBalancerClass = &c.LoadBalancerClass
	}
	return s
}

// assignedIP is the address MetalLB gave a Service ("": none yet).
func assignedIP(s *corev1.Service) string {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
	}
	return ""
}
