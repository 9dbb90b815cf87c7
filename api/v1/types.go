package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// InventorySpec is empty: an Inventory is written by the inventory operator only.
type InventorySpec struct{}

// InventoryStatus is the inventory operator's report of the cluster: its nodes, what
// runs on them (in total and per provider, so that each provider can tell its own
// leases' pods from everyone else's), their GPUs, and the storage classes offered.
type InventoryStatus struct {
	// UpdatedAt is when the operator last wrote this report. It writes at least every
	// heartbeat, so a report older than a few heartbeats means the operator is gone.
	UpdatedAt metav1.Time `json:"updatedAt,omitempty"`
	// Operator names the operator's replica that wrote the report (its leader identity).
	Operator string `json:"operator,omitempty"`
	// Nodes are every node of the cluster, sorted by name, the ones that take no
	// workloads too (with why). Atomic: the operator writes the whole list each time,
	// and server-side apply then keeps no per-node field records (which would double
	// the object's size).
	// +optional
	// +listType=atomic
	Nodes []InventoryNode `json:"nodes,omitempty"`
	// Storage are the storage classes the operator is configured to offer, sorted.
	// +optional
	// +listType=atomic
	Storage []InventoryStorage `json:"storage,omitempty"`
	// Problems are what the operator could not make sense of (an unknown GPU, a class
	// without capacity), one sentence each, so they show next to the numbers.
	// +optional
	Problems []string `json:"problems,omitempty"`
}

// InventoryNode is one node.
type InventoryNode struct {
	Name string `json:"name"`
	// Schedulable is true when the node is Ready, not cordoned and has no NoSchedule
	// or NoExecute taint; NotSchedulable says which of those it is not.
	Schedulable    bool   `json:"schedulable"`
	NotSchedulable string `json:"notSchedulable,omitempty"`
	// GPUOnly: the node is tainted nvidia.com/gpu (managed Kubernetes' GPU node
	// pools): it takes GPU workloads only.
	// +optional
	GPUOnly bool `json:"gpuOnly,omitempty"`
	// Allocatable is the node's allocatable resources, with nvidia.com/gpu counting
	// only the GPUs offered (see GPU).
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Used is the requests of every pod scheduled on the node that has not finished.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// Leases is the part of Used that the leases of each provider hold.
	// +optional
	Leases []InventoryOwnerUsage `json:"leases,omitempty"`
	// GPU is the node's GPUs, when it has any.
	// +optional
	GPU *InventoryGPU `json:"gpu,omitempty"`
	// StorageClasses are the offered storage classes whose volumes the node can use.
	// +optional
	StorageClasses []string `json:"storageClasses,omitempty"`
}

// InventoryOwnerUsage is what one provider's leases use.
type InventoryOwnerUsage struct {
	Provider string              `json:"provider"`
	ChainID  string              `json:"chainID"`
	Used     corev1.ResourceList `json:"used"`
}

// InventoryGPU describes a node's GPUs the way SDLs ask for them.
type InventoryGPU struct {
	// Vendor, Model, RAM and Interface are the SDL's names ("nvidia", "a100", "80Gi",
	// "sxm"); Model is empty for a card the operator could not name.
	Vendor    string `json:"vendor,omitempty"`
	Model     string `json:"model,omitempty"`
	RAM       string `json:"ram,omitempty"`
	Interface string `json:"interface,omitempty"`
	// Product is the product name the node's labels give (GPU feature discovery's
	// nvidia.com/gpu.product); PCIDevice the PCI vendor:device id (node feature
	// discovery's pci-10de labels), when known.
	Product   string `json:"product,omitempty"`
	PCIDevice string `json:"pciDevice,omitempty"`
	// Devices is how many GPUs the device plugin advertises (allocatable nvidia.com/gpu,
	// or nvidia.com/gpu.shared when it renames shared ones);
	// Offered how many of them leases may have (0 when the card is unknown, shared or
	// partitioned, with the reason in Message).
	Devices int64 `json:"devices"`
	Offered int64 `json:"offered"`
	// Labelled is true when the node carries the capability labels GPU pods' node
	// affinity selects on (berth.dev/capabilities.gpu…): providers count its offered
	// GPUs only then, since a lease's pods could not be placed there otherwise.
	// +optional
	Labelled bool `json:"labelled,omitempty"`
	// Sharing is "time-slicing" or "mps" when each device is shared by Replicas
	// workloads, "mig" when the GPUs are partitioned into MIG devices.
	// +optional
	Sharing string `json:"sharing,omitempty"`
	// +optional
	Replicas int64 `json:"replicas,omitempty"`
	// MIG are the MIG devices by profile ("1g.10gb": 7), when the node has them.
	// +optional
	MIG map[string]int64 `json:"mig,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// InventoryStorage is one storage class offered.
type InventoryStorage struct {
	// Class is the cluster's StorageClass.
	Class string `json:"class"`
	// Source is where the capacity comes from: csi (the driver's CSIStorageCapacity
	// objects: free space plus what bound claims hold), local (a configured size per
	// node or in all, against the bound claims), ceph (a configured pool size, or the
	// Rook CephCluster's reported capacity).
	Source string `json:"source"`
	// Capacity is the class's size; Used what bound claims of the class hold; Leases
	// the part of Used each provider's leases hold.
	Capacity resource.Quantity `json:"capacity"`
	Used     resource.Quantity `json:"used"`
	// +optional
	Leases []InventoryOwnerStorage `json:"leases,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// InventoryOwnerStorage is what one provider's leases' claims of a class hold.
type InventoryOwnerStorage struct {
	Provider string            `json:"provider"`
	ChainID  string            `json:"chainID"`
	Used     resource.Quantity `json:"used"`
}

// Inventory is the cluster's inventory as the inventory operator sees it; providers
// bid on it. Cluster-scoped; one per inventory operator.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=inv
// +kubebuilder:printcolumn:name="Updated",type=date,JSONPath=`.status.updatedAt`
// +kubebuilder:printcolumn:name="Operator",type=string,JSONPath=`.status.operator`
type Inventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InventorySpec   `json:"spec,omitempty"`
	Status InventoryStatus `json:"status,omitempty"`
}

// InventoryList is a list of Inventories.
//
// +kubebuilder:object:root=true
type InventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Inventory `json:"items"`
}
