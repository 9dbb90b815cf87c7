package rest

import (
	"slices"

	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/market"
)

// leaseStatus is GET …/status's answer, in Akash's shape, plus berth's own section.
type leaseStatus struct {
	Services       map[string]serviceStatus   `json:"services"`
	ForwardedPorts map[string][]forwardedPort `json:"forwarded_ports"`
	IPs            map[string][]leasedIP      `json:"ips"`
	Berth          berthLeaseStatus           `json:"berth"`
}

// serviceStatus is one service, as Akash reports it.
type serviceStatus struct {
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

type forwardedPort struct {
	Host         string `json:"host,omitempty"`
	Port         uint16 `json:"port"`
	ExternalPort uint16 `json:"externalPort"`
	Proto        string `json:"proto"`
	Name         string `json:"name"`
}

// leasedIP keeps Akash's field names (its type has no JSON tags).
type leasedIP struct {
	Port         uint32 `json:"Port"`
	ExternalPort uint32 `json:"ExternalPort"`
	Protocol     string `json:"Protocol"`
	IP           string `json:"IP"`
}

// berthLeaseStatus is what berth adds: readiness, the deployment manager's phase and
// last error, why replicas are missing, and recent events.
type berthLeaseStatus struct {
	Ready    bool                `json:"ready"`
	Phase    string              `json:"phase,omitempty"`
	Error    string              `json:"error,omitempty"`
	Services map[string][]string `json:"service_errors,omitempty"`
	Events   []kube.Event        `json:"events,omitempty"`
}

func leaseStatusOf(g *market.ManifestGroup, st kube.LeaseStatus, dep cluster.DeploymentState, host string) leaseStatus {
	out := leaseStatus{Services: map[string]serviceStatus{}, Berth: berthLeaseStatus{Ready: st.Ready, Phase: dep.Phase, Error: dep.Error, Events: st.Events}}
	for i := range g.Services {
		svc := &g.Services[i]
		ks := findService(st, svc.Name)
		out.Services[svc.Name] = serviceStatusOf(g, svc, ks)
		if ks == nil {
			continue
		}
		if len(ks.Errors) > 0 {
			if out.Berth.Services == nil {
				out.Berth.Services = map[string][]string{}
			}
			out.Berth.Services[svc.Name] = ks.Errors
		}
		for _, p := range ks.Forwarded {
			if out.ForwardedPorts == nil {
				out.ForwardedPorts = map[string][]forwardedPort{}
			}
			out.ForwardedPorts[svc.Name] = append(out.ForwardedPorts[svc.Name], forwardedPort{
				Host: host, Port: uint16(p.Port), ExternalPort: uint16(p.ExternalPort), Proto: p.Proto, Name: svc.Name, //nolint:gosec // ports are 1–65535
			})
		}
	}
	return out
}

// serviceStatusOf reports a service; its URIs are the hostnames its HTTP ports
// accept. A service the cluster has no workload for yet counts its manifest replicas
// as wanted, none available.
func serviceStatusOf(_ *market.ManifestGroup, svc *market.Service, ks *kube.ServiceStatus) serviceStatus {
	out := serviceStatus{Name: svc.Name, Total: int32(svc.Count), Replicas: 0} //nolint:gosec // count ≤ the ledger's limit
	var uris []string
	for i := range svc.Expose {
		if e := &svc.Expose[i]; e.IsIngress() {
			for _, h := range e.Hosts {
				if !slices.Contains(uris, h) {
					uris = append(uris, h)
				}
			}
		}
	}
	out.URIs = uris
	if ks != nil {
		out.Available, out.Total = ks.Available, ks.Total
		out.Replicas, out.UpdatedReplicas, out.ReadyReplicas, out.AvailableReplicas = ks.Replicas, ks.Updated, ks.Ready, ks.Available
		out.ObservedGeneration = ks.ObservedGeneration
	}
	return out
}
