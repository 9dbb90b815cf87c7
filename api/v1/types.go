package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// LeaseRef names a lease on the ledger.
type LeaseRef struct {
	// Owner is the tenant's address.
	// +kubebuilder:validation:MinLength=1
	Owner string `json:"owner"`
	// DSeq is the deployment sequence, a decimal (64 bits do not fit JSON numbers).
	// +kubebuilder:validation:Pattern=`^[0-9]{1,20}$`
	DSeq string `json:"dseq"`
	// +kubebuilder:validation:Minimum=1
	GSeq int64 `json:"gseq"`
	// +kubebuilder:validation:Minimum=1
	OSeq int64 `json:"oseq"`
	// Provider is our address.
	// +kubebuilder:validation:MinLength=1
	Provider string `json:"provider"`
}

// ManifestSpec is what a lease runs.
type ManifestSpec struct {
	Lease LeaseRef `json:"lease"`
	// Version is the deployment version (hex SHA-256) this manifest matches.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Version string `json:"version"`
	// Group is the lease's manifest group as the tenant sent it (Akash's JSON), except
	// that registry passwords are removed: they live in the lease's pull Secrets.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Group runtime.RawExtension `json:"group"`
	// Routes are the hostnames and leased-IP ports routed to this lease. What else its
	// group asks for is withheld: another deployment of the tenant holds it.
	// +optional
	Routes *ManifestRoutes `json:"routes,omitempty"`
}

// ManifestRoutes are what is routed to a lease from outside.
type ManifestRoutes struct {
	// +optional
	Hosts []string `json:"hosts,omitempty"`
	// +optional
	LeasedIPs []LeasedIPRoute `json:"leasedIPs,omitempty"`
}

// LeasedIPRoute is a port on one of the tenant's leased IPs.
type LeasedIPRoute struct {
	// Endpoint is the SDL endpoint's name.
	// +kubebuilder:validation:MinLength=1
	Endpoint string `json:"endpoint"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol"`
}

// ManifestStatus is how the lease's deployment stands.
type ManifestStatus struct {
	// ObservedGeneration is the generation last applied.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending, Applied, Ready or Failed.
	Phase string `json:"phase,omitempty"`
	// Message says why, when the phase is Failed.
	Message    string             `json:"message,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Manifest is the durable record of what a lease runs; the cluster service rebuilds
// from these after a restart.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lm
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.lease.owner`
// +kubebuilder:printcolumn:name="DSeq",type=string,JSONPath=`.spec.lease.dseq`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Manifest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ManifestSpec   `json:"spec"`
	Status ManifestStatus `json:"status,omitempty"`
}

// ManifestList is a list of Manifests.
//
// +kubebuilder:object:root=true
type ManifestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Manifest `json:"items"`
}

// ProviderHostSpec is a hostname a lease's service serves through the ingress.
type ProviderHostSpec struct {
	Lease LeaseRef `json:"lease"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname"`
	// +kubebuilder:validation:MinLength=1
	Service string `json:"service"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ExternalPort int32 `json:"externalPort"`
	// ProxyBufferSize is the size in bytes of the ingress's buffer for the service's
	// response headers (the SDL's http_options.proxy_buffer_size; ingress-nginx's
	// proxy-buffer-size). Absent when the SDL does not set it: the ingress's default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	ProxyBufferSize int32 `json:"proxyBufferSize,omitempty"`
	// The rest of the SDL's http_options for the port, as the manifest carries them:
	// timeouts in milliseconds, the largest request body in bytes, and how a failed
	// request is retried on another replica (next_tries, next_timeout, next_cases).
	// Absent or 0: the ingress's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadTimeout int64 `json:"readTimeout,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	SendTimeout int64 `json:"sendTimeout,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxBodySize int64 `json:"maxBodySize,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	NextTries int64 `json:"nextTries,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	NextTimeout int64 `json:"nextTimeout,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=16
	NextCases []string `json:"nextCases,omitempty"`
}

// ProviderHost phases, set by the hostname operator.
const (
	// HostRouted: the route (Ingress or HTTPRoute) is written; the operator is not
	// configured to check it further.
	HostRouted = "Routed"
	// HostReady: the route is written and its check passed (the ingress controller
	// admitted it, or a request through it reached the service).
	HostReady = "Ready"
	// HostUnready: the route is written but its check has not passed (yet).
	HostUnready = "Unready"
	// HostConflict: another lease holds the hostname; this one is not routed.
	HostConflict = "Conflict"
	// HostFailed: the route could not be written; the operator keeps trying.
	HostFailed = "Failed"
)

// ProviderHostStatus is the hostname operator's report.
type ProviderHostStatus struct {
	// Phase is Routed, Ready, Unready, Conflict or Failed.
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
	// Route names the Ingress or HTTPRoute serving the hostname (Kind/name).
	// +optional
	Route      string             `json:"route,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderHost is a hostname accepted for a lease.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.spec.hostname`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
type ProviderHost struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderHostSpec   `json:"spec"`
	Status ProviderHostStatus `json:"status,omitempty"`
}

// ProviderHostList is a list of ProviderHosts.
//
// +kubebuilder:object:root=true
type ProviderHostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderHost `json:"items"`
}

// ProviderLeasedIPSpec is one port of a lease's service on a leased IP.
type ProviderLeasedIPSpec struct {
	Lease LeaseRef `json:"lease"`
	// Name is the SDL endpoint's name: ports with the same name share one IP.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Service string `json:"service"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ExternalPort int32 `json:"externalPort"`
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol"`
}

// ProviderLeasedIP phases, set by the IP operator.
const (
	// LeasedIPAssigned: MetalLB gave the port's Service an address (status.ip).
	LeasedIPAssigned = "Assigned"
	// LeasedIPPending: no address yet; the message says why (MetalLB's refusal, such
	// as an exhausted pool, or that it has not answered yet).
	LeasedIPPending = "Pending"
	// LeasedIPFailed: the Service could not be written; the operator keeps trying.
	LeasedIPFailed = "Failed"
)

// ProviderLeasedIPStatus is the IP operator's report.
type ProviderLeasedIPStatus struct {
	// IP is the address assigned.
	IP string `json:"ip,omitempty"`
	// Phase is Assigned, Pending or Failed.
	Phase string `json:"phase,omitempty"`
	// Service names the LoadBalancer Service of the port.
	// +optional
	ServiceName string             `json:"serviceName,omitempty"`
	Message     string             `json:"message,omitempty"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderLeasedIP is a port of a lease on a leased IP address.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.externalPort`
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.ip`
type ProviderLeasedIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderLeasedIPSpec   `json:"spec"`
	Status ProviderLeasedIPStatus `json:"status,omitempty"`
}

// ProviderLeasedIPList is a list of ProviderLeasedIPs.
//
// +kubebuilder:object:root=true
type ProviderLeasedIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderLeasedIP `json:"items"`
}
