package market

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Manifest is what a tenant sends the provider for a deployment: per group, the
// services to run. Its version hash (Version) is what the deployment records on the
// ledger; a provider accepts a manifest only if the hashes match.
type Manifest []ManifestGroup

// ManifestGroup is the services of one deployment group.
type ManifestGroup struct {
	Name     string    `json:"name"`
	Services []Service `json:"services"`
}

// Service is one container service of a group.
type Service struct {
	Args        []string            `json:"args"`
	Command     []string            `json:"command"`
	Count       uint32              `json:"count"`
	Credentials *ServiceCredentials `json:"credentials"`
	Env         []string            `json:"env"`
	Expose      []ServiceExpose     `json:"expose"`
	Image       string              `json:"image"`
	Name        string              `json:"name"`
	Params      *ServiceParams      `json:"params,omitempty"`
	Resources   Resources           `json:"resources"`
}

// Protocols of a service port.
const (
	ProtoTCP = "TCP"
	ProtoUDP = "UDP"
)

// ServiceExpose is one exposed port of a service toward one destination: another
// service of the deployment, or the world when Global.
type ServiceExpose struct {
	EndpointSequenceNumber uint32             `json:"endpointSequenceNumber"`
	ExternalPort           uint32             `json:"externalPort"`
	Global                 bool               `json:"global"`
	Hosts                  []string           `json:"hosts"`
	HTTPOptions            ServiceHTTPOptions `json:"httpOptions"`
	IP                     string             `json:"ip"`
	Port                   uint32             `json:"port"`
	Proto                  string             `json:"proto"`
	Service                string             `json:"service"`
}

// ExternalPortOrPort is the port the world sees: ExternalPort, or Port when that is 0.
func (e ServiceExpose) ExternalPortOrPort() uint32 {
	if e.ExternalPort == 0 {
		return e.Port
	}
	return e.ExternalPort
}

// IsIngress reports a global TCP port 80, served through the provider's HTTP ingress.
func (e ServiceExpose) IsIngress() bool {
	return e.Proto == ProtoTCP && e.Global && e.ExternalPortOrPort() == 80
}

// Endpoints are the endpoints this port needs from its resource unit: none unless it is
// global; an HTTP endpoint for ingress, a random port otherwise; plus a leased IP.
func (e ServiceExpose) Endpoints() Endpoints {
	if !e.Global {
		return Endpoints{}
	}
	eps := make(Endpoints, 0, 2)
	if e.IP != "" {
		eps = append(eps, Endpoint{Kind: EndpointLeasedIP, SequenceNumber: e.EndpointSequenceNumber})
	}
	kind := EndpointRandomPort
	if e.IsIngress() {
		kind = EndpointSharedHTTP
	}
	eps = append(eps, Endpoint{Kind: kind})
	if len(eps) == 2 && eps[1].SequenceNumber < eps[0].SequenceNumber {
		eps[0], eps[1] = eps[1], eps[0]
	}
	return eps
}

// ServiceHTTPOptions tune the ingress for an HTTP port.
type ServiceHTTPOptions struct {
	MaxBodySize uint32   `json:"maxBodySize"`
	NextCases   []string `json:"nextCases,omitempty"`
	NextTimeout uint32   `json:"nextTimeout"`
	NextTries   uint32   `json:"nextTries"`
	// ProxyBufferSize is the ingress's buffer for the response headers of the service,
	// in bytes, at most MaxProxyBufferSize. 0 (not set) leaves it to the provider, and
	// is left out of the JSON, as on Akash: a manifest that does not set it hashes as it
	// did before the field existed.
	ProxyBufferSize uint32 `json:"proxyBufferSize,omitempty"`
	ReadTimeout     uint32 `json:"readTimeout"`
	SendTimeout     uint32 `json:"sendTimeout"`
}

// MaxProxyBufferSize is the largest ServiceHTTPOptions.ProxyBufferSize: 1 MiB, Akash's
// limit.
const MaxProxyBufferSize = 1 << 20

// Limits of the other HTTP options, as on Akash: the largest request body (100 MiB),
// timeouts in milliseconds (60 s).
const (
	MaxBodySize    = 100 << 20
	MaxHTTPTimeout = 60000
)

// NextCases are the values of ServiceHTTPOptions.NextCases: when a request is retried
// on another replica ("off" alone: never).
var NextCases = []string{"error", "timeout", "500", "502", "503", "504", "403", "404", "429", "off"}

// Validate checks the options against Akash's limits; what reaches an ingress
// controller's configuration must be one of the known values.
func (h *ServiceHTTPOptions) Validate() error {
	switch {
	case h.MaxBodySize > MaxBodySize:
		return fmt.Errorf("max body size %d is over the limit of %d bytes (100 MiB)", h.MaxBodySize, MaxBodySize)
	case h.ReadTimeout > MaxHTTPTimeout:
		return fmt.Errorf("read timeout %d is over the limit of %d ms", h.ReadTimeout, MaxHTTPTimeout)
	case h.SendTimeout > MaxHTTPTimeout:
		return fmt.Errorf("send timeout %d is over the limit of %d ms", h.SendTimeout, MaxHTTPTimeout)
	case h.ProxyBufferSize > MaxProxyBufferSize:
		return fmt.Errorf("proxy buffer size %d is over the limit of %d bytes (1 MiB)", h.ProxyBufferSize, MaxProxyBufferSize)
	case len(h.NextCases) > len(NextCases):
		return fmt.Errorf("%d next cases: there are only %d", len(h.NextCases), len(NextCases))
	}
	for i, c := range h.NextCases {
		switch {
		case !slices.Contains(NextCases, c):
			return fmt.Errorf("next case %d: %q is not one of %s", i, c, strings.Join(NextCases, ", "))
		case c == "off" && len(h.NextCases) != 1:
			return errors.New(`next case "off" cannot be combined with other cases`)
		case slices.Index(h.NextCases, c) != i:
			return fmt.Errorf("next case %q is listed twice", c)
		}
	}
	return nil
}

// ServiceParams are optional per-service settings.
type ServiceParams struct {
	Permissions *ServicePermissions `json:"permissions,omitempty"`
	Storage     []StorageParams     `json:"storage"`
	TEE         *TEEParams          `json:"tee,omitempty"`
}

// StorageParams mount one of the service's storage volumes.
type StorageParams struct {
	Mount    string `json:"mount"`
	Name     string `json:"name"`
	ReadOnly bool   `json:"readOnly"`
}

// ServicePermissions grant a service read access to provider APIs about its lease.
type ServicePermissions struct {
	Read []string `json:"read,omitempty"`
}

// TEE types: confidential compute on the CPU only, or on the CPU and GPUs.
const (
	TEETypeCPU    = "cpu"
	TEETypeCPUGPU = "cpu-gpu"
)

// TEEParams ask for a trusted execution environment.
type TEEParams struct {
	Attestation bool   `json:"attestation"`
	Type        string `json:"type"`
}

// ServiceCredentials authenticate image pulls from a private registry.
type ServiceCredentials struct {
	Email    string `json:"email"`
	Host     string `json:"host"`
	Password string `json:"password"`
	Username string `json:"username"`
}
