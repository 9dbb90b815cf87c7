package rest

import (
	"fmt"
	"slices"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
)

func leaseStatusOf(g *market.ManifestGroup, st deploy.LeaseStatus, dep deploy.DeploymentState, routes deploy.Routes, host string) api.LeaseStatus {
	out := api.LeaseStatus{Services: map[string]api.ServiceStatus{}, Berth: api.BerthLeaseStatus{Ready: st.Ready, Phase: dep.Phase}}
	if dep.Error != "" {
		// The cause stays in the provider's log: it can name the cluster's addresses
		// and accounts. Why replicas are missing is in service_errors.
		out.Berth.Error = fmt.Sprintf("the provider has not applied this manifest yet (%d attempts); it keeps trying", dep.Attempts)
	}
	for _, h := range st.Hosts {
		out.Berth.Hosts = append(out.Berth.Hosts, hostStatusOf(h))
	}
	for _, p := range st.IPs {
		ls := api.LeasedIPStatus{Service: p.Service, Endpoint: p.Endpoint, Port: uint32(max(p.Port, 0)), ExternalPort: uint32(max(p.ExternalPort, 0)),
			Protocol: p.Protocol, IP: p.IP, Phase: p.Phase, Message: p.Message}
		switch p.Phase {
		case berthv1.LeasedIPFailed:
			ls.Message = "the provider could not ask for an address yet; it keeps trying"
		case "":
			ls.Message = "waiting for the provider's IP operator"
		}
		out.Berth.LeasedIPs = append(out.Berth.LeasedIPs, ls)
		if p.IP == "" {
			continue
		}
		if out.IPs == nil {
			out.IPs = map[string][]api.LeasedIP{}
		}
		out.IPs[p.Service] = append(out.IPs[p.Service], api.LeasedIP{Port: ls.Port, ExternalPort: ls.ExternalPort, Protocol: p.Protocol, IP: p.IP})
	}
	for _, e := range st.Events {
		out.Berth.Events = append(out.Berth.Events, api.Event{Time: e.Time, Type: e.Type, Reason: e.Reason, Object: e.Object, Message: e.Message})
	}
	for i := range g.Services {
		svc := &g.Services[i]
		ks := findService(st, svc.Name)
		out.Services[svc.Name] = serviceStatusOf(svc, ks, routes)
		if ks == nil {
			continue
		}
		if len(ks.Errors) > 0 {
			if out.Berth.Services == nil {
				out.Berth.Services = map[string][]string{}
			}
			out.Berth.Services[svc.Name] = ks.Errors
		}
		if ks.Restarts > 0 || ks.LastExit != nil {
			if out.Berth.Runs == nil {
				out.Berth.Runs = map[string]api.ServiceRuns{}
			}
			runs := api.ServiceRuns{Restarts: ks.Restarts}
			if e := ks.LastExit; e != nil {
				runs.LastExit = &api.ContainerExit{Pod: e.Pod, Container: e.Container, Reason: e.Reason, ExitCode: e.ExitCode, Time: e.Time}
			}
			out.Berth.Runs[svc.Name] = runs
		}
		for _, p := range ks.Forwarded {
			if out.ForwardedPorts == nil {
				out.ForwardedPorts = map[string][]api.ForwardedPort{}
			}
			out.ForwardedPorts[svc.Name] = append(out.ForwardedPorts[svc.Name], api.ForwardedPort{
				Host: host, Port: uint16(p.Port), ExternalPort: uint16(p.ExternalPort), Proto: p.Proto, Name: svc.Name, //nolint:gosec // ports are 1–65535
			})
		}
	}
	return out
}

// serviceStatusOf reports a service; its URIs are the hostnames its HTTP ports
// accept and the lease holds (not those withheld). A service the cluster has no workload for yet counts its manifest replicas
// as wanted, none available.
func serviceStatusOf(svc *market.Service, ks *deploy.ServiceStatus, routes deploy.Routes) api.ServiceStatus {
	out := api.ServiceStatus{Name: svc.Name, Total: int32(svc.Count), Replicas: 0} //nolint:gosec // count ≤ the ledger's limit
	var uris []string
	for i := range svc.Expose {
		if e := &svc.Expose[i]; e.IsIngress() {
			for _, h := range e.Hosts {
				if routes.HasHost(h) && !slices.Contains(uris, h) {
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

// hostStatusOf reports a hostname to its tenant. A failure's cause (the API server's
// words) stays with the operator.
func hostStatusOf(h deploy.HostStatus) api.HostStatus {
	out := api.HostStatus{Hostname: h.Hostname, Service: h.Service, Phase: h.Phase, Ready: h.Phase == berthv1.HostReady, Message: h.Message}
	switch h.Phase {
	case berthv1.HostFailed:
		out.Message = "the provider could not route this hostname yet; it keeps trying"
	case "":
		out.Message = "waiting for the provider's hostname operator"
	}
	return out
}
