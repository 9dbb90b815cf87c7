// Package gateway holds the JSON bodies of the tenant gateway's routes: the wire
// contract between providers and tenants' tools, in the shapes Akash's provider uses
// (plus berth's own fields, which Akash's tools ignore).
package gateway

import "time"

// LeaseStatus is GET /lease/{dseq}/{gseq}/{oseq}/status.
type LeaseStatus struct {
	Services       map[string]ServiceStatus   `json:"services"`
	ForwardedPorts map[string][]ForwardedPort `json:"forwarded_ports"`
	IPs            map[string][]LeasedIP      `json:"ips"`
	Berth          BerthLeaseStatus           `json:"berth"`
}

// ServiceStatus is one service (also GET …/service/{name}/status).
type ServiceStatus struct {
	Name               string   `json:"name"`
	Available          int32    `json:"available"`
	Total              int32    `json:"total"`
	URIs               []string `json:"uris"`
	ObservedGeneration int64    `json:"observed_generation"`
	Replicas           int32    `json:"replicas"`
	UpdatedReplicas    int32    `json:"updated_replicas"`
	ReadyReplicas      int32    `json:"ready_replicas"`
	AvailableReplicas  int32    `json:"available_replicas"`
}

// ForwardedPort is a global non-HTTP port reached through a node port.
type ForwardedPort struct {
	Host         string `json:"host,omitempty"`
	Port         uint16 `json:"port"`
	ExternalPort uint16 `json:"externalPort"`
	Proto        string `json:"proto"`
	Name         string `json:"name"`
}

// LeasedIP is a port on a leased IP (Akash's field names: its type has no JSON tags).
type LeasedIP struct {
	Port         uint32 `json:"Port"`
	ExternalPort uint32 `json:"ExternalPort"`
	Protocol     string `json:"Protocol"`
	IP           string `json:"IP"`
}

// BerthLeaseStatus is what berth adds: readiness, the deployment's phase and last
// error, why replicas are missing, and recent Kubernetes events.
type BerthLeaseStatus struct {
	Ready    bool                `json:"ready"`
	Phase    string              `json:"phase,omitempty"`
	Error    string              `json:"error,omitempty"`
	Services map[string][]string `json:"service_errors,omitempty"`
	Events   []Event             `json:"events,omitempty"`
	// Hosts say how each of the lease's hostnames is routed (the hostname
	// operator's report).
	Hosts []HostStatus `json:"hosts,omitempty"`
	// LeasedIPs say how each of the lease's ports on leased IPs stands (the IP
	// operator's report); ips, Akash's, lists those with an address.
	LeasedIPs []LeasedIPStatus `json:"leased_ips,omitempty"`
	// IngressHTTPPort is the port the provider's HTTP ingress answers its services'
	// URIs on when it is not 80 (a local cluster's ingress on a loopback port).
	IngressHTTPPort int `json:"ingress_http_port,omitempty"`
	// Runs say, for each service whose containers have restarted or ended, how
	// often and how the last run ended (killed out of memory, an exit code).
	Runs map[string]ServiceRuns `json:"service_runs,omitempty"`
}

// ServiceRuns is how a service's containers have run: the restarts of those of its
// current pods, and how the latest run that ended did.
type ServiceRuns struct {
	Restarts int32          `json:"restarts"`
	LastExit *ContainerExit `json:"last_exit,omitempty"`
}

// ContainerExit is how one run of a container ended: Reason is OOMKilled (killed at
// its memory limit), Error (a non-zero exit) or Completed (exit 0).
type ContainerExit struct {
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	Reason    string    `json:"reason"`
	ExitCode  int32     `json:"exit_code"`
	Time      time.Time `json:"time"`
}

// LeasedIPStatus is one port of a lease on a leased IP: its address once assigned,
// its phase (Assigned; Pending: no address yet, and why; Failed: the provider could
// not ask for one yet; "" until the operator has seen it).
type LeasedIPStatus struct {
	Service      string `json:"service"`
	Endpoint     string `json:"endpoint"`
	Port         uint32 `json:"port"`
	ExternalPort uint32 `json:"external_port"`
	Protocol     string `json:"protocol"`
	IP           string `json:"ip,omitempty"`
	Phase        string `json:"phase"`
	Message      string `json:"message,omitempty"`
}

// HostStatus is one hostname of a lease: its phase (Routed: the route is written;
// Ready: the ingress took it or a request through it reached the service; Unready;
// Conflict: another lease holds the hostname; Failed: the provider could not route it
// yet; "" until the operator has seen it) and why.
type HostStatus struct {
	Hostname string `json:"hostname"`
	Service  string `json:"service"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Message  string `json:"message,omitempty"`
}

// Event is a Kubernetes event about one of the lease's objects.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  string    `json:"object"`
	Message string    `json:"message"`
}

// Error is every error body: {"message": "..."}.
type Error struct {
	Message string `json:"message"`
}

// HostnameMigration is POST /hostname/migrate's body: hostnames to move to the
// tenant's lease of deployment destination_dseq, group destination_gseq.
type HostnameMigration struct {
	Hostnames       []string `json:"hostnames_to_migrate"`
	DestinationDSeq uint64   `json:"destination_dseq"`
	DestinationGSeq uint32   `json:"destination_gseq"`
}

// EndpointMigration is POST /endpoint/migrate's body: the tenant's leased-IP
// endpoints (SDL names) to route to its lease of deployment destination_dseq, group
// destination_gseq.
type EndpointMigration struct {
	Endpoints       []string `json:"endpoints_to_migrate"`
	DestinationDSeq uint64   `json:"destination_dseq"`
	DestinationGSeq uint32   `json:"destination_gseq"`
}

// Transferred is a migration's answer: what moved.
type Transferred struct {
	Transferred []string `json:"transferred"`
}

// Address is GET /address.
type Address struct {
	Address string `json:"address"`
}

// LogMessage is one line of a container's log, a text frame of the logs websocket.
type LogMessage struct {
	// Name is the pod's name.
	Name    string `json:"name"`
	Message string `json:"message"`
}

// LeaseEvent is a Kubernetes event about one of the lease's objects, a text frame of
// the kubeevents websocket.
type LeaseEvent struct {
	Type                string      `json:"type"`
	ReportingController string      `json:"reportingController,omitempty"`
	ReportingInstance   string      `json:"reportingInstance,omitempty"`
	Reason              string      `json:"reason"`
	Note                string      `json:"note"`
	Object              EventObject `json:"object"`
}

// EventObject is what an event is about.
type EventObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Shell websocket frames are binary messages: a code, then the payload.
const (
	ShellStdout  byte = 100 // provider → tenant: output
	ShellStderr  byte = 101 // provider → tenant: error output
	ShellResult  byte = 102 // provider → tenant: a ShellExit, as JSON and a newline
	ShellFailure byte = 103 // provider → tenant: the provider failed (no payload)
	ShellStdin   byte = 104 // tenant → provider: input
	ShellResize  byte = 105 // tenant → provider: width, height (uint16 big-endian each)
)

// ShellExit is the result frame's payload: the command's exit code, or why it could
// not run (then ExitCode is 0, as on Akash).
type ShellExit struct {
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message,omitempty"`
}

// Websocket close codes besides the normal closure.
const (
	CloseInternal    = 4000 // the provider failed, the lease has no running pods, or a pod's log could not be read
	CloseNotFound    = 4001 // no such lease or service
	CloseUnavailable = 4002 // the provider cannot reach what it needs; try again
)
