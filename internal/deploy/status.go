package deploy

import (
	"time"

	"berth.dev/berth/api/market/v1"
)

// ForwardedPort is a global port of a service reached through a node port.
type ForwardedPort struct {
	Port         int32  `json:"port"`
	ExternalPort int32  `json:"externalPort"`
	Proto        string `json:"proto"`
	Name         string `json:"name"`
}

// ServiceStatus is one manifest service as the cluster runs it.
type ServiceStatus struct {
	Name string `json:"name"`
	// Total is the replicas wanted; Available those ready long enough to serve; Ready
	// those passing readiness now.
	Total     int32 `json:"total"`
	Available int32 `json:"available"`
	Ready     int32 `json:"ready"`
	// Replicas are the pods that exist, Updated those running the current manifest;
	// ObservedGeneration is the last workload spec the controller acted on.
	Replicas           int32           `json:"replicas"`
	Updated            int32           `json:"updated"`
	ObservedGeneration int64           `json:"observed_generation"`
	Forwarded          []ForwardedPort `json:"forwarded_ports,omitempty"`
	// Errors are why replicas are missing (unschedulable, image pull, crash loop,
	// refused by admission), newest state first.
	Errors []string `json:"errors,omitempty"`
	// Restarts counts the restarts of the containers of the service's current pods;
	// LastExit is how the latest run of one of them that ended did (nil: none ended).
	// A pod being deleted (an update, a close) is not counted: its stop was asked for.
	Restarts int32          `json:"restarts,omitempty"`
	LastExit *ContainerExit `json:"last_exit,omitempty"`
}

// ContainerExit is how one run of a container ended.
type ContainerExit struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Reason is the runtime's: OOMKilled (killed at its memory limit), Error (a
	// non-zero exit), Completed (exit 0).
	Reason   string    `json:"reason"`
	ExitCode int32     `json:"exit_code"`
	Time     time.Time `json:"time"`
}

// Event is a Kubernetes event about one of a lease's objects.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // Normal or Warning
	Reason  string    `json:"reason"`
	Object  string    `json:"object"` // kind/name
	Message string    `json:"message"`
	// Count is how many times it happened (at least 1; Time is the last).
	Count int32 `json:"count"`
	// Namespace is the object's (the lease's namespace; not in a status's JSON).
	Namespace string `json:"-"`
}

// LeaseStatus is a lease's state on the cluster, computed from the informers' caches.
type LeaseStatus struct {
	Lease    market.LeaseID  `json:"lease"`
	Services []ServiceStatus `json:"services"`
	// Events are the lease's most recent Kubernetes events, newest last.
	Events []Event `json:"events,omitempty"`
	// Hosts are the lease's hostnames as the hostname operator reports them (from
	// the ProviderHosts' status), by hostname.
	Hosts []HostStatus `json:"hosts,omitempty"`
	// IPs are the lease's ports on leased IPs as the IP operator reports them.
	IPs []LeasedIPStatus `json:"ips,omitempty"`
	// Ready: every service has all its replicas available.
	Ready     bool      `json:"ready"`
	UpdatedAt time.Time `json:"updated_at"`
}

// HostStatus is how one hostname of a lease is routed.
type HostStatus struct {
	Hostname string `json:"hostname"`
	Service  string `json:"service"`
	// Phase is the ProviderHost's (Routed, Ready, Unready, Conflict, Failed; "" until
	// the hostname operator has seen it).
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}

// LeasedIPStatus is one port of a lease on a leased IP.
type LeasedIPStatus struct {
	Service      string `json:"service"`
	Endpoint     string `json:"endpoint"`
	Port         int32  `json:"port"`
	ExternalPort int32  `json:"external_port"`
	Protocol     string `json:"protocol"`
	// IP is the address ("" until MetalLB assigns one); Phase and Message the
	// ProviderLeasedIP's (Assigned, Pending, Failed; "" until the IP operator has
	// seen it).
	IP      string `json:"ip,omitempty"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
}
