package rest

import (
	"reflect"
	"testing"
	"time"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// TestLeaseStatusRoutes: the operators' reports reach the tenant: hostnames with their
// phase, ports on leased IPs in Akash's "ips" once assigned and all of them with their
// phase in berth's part; a failure's cause (the API server's words) stays with the
// provider.
func TestLeaseStatusRoutes(t *testing.T) {
	g := market.ManifestGroup{Name: "g", Services: []market.Service{{Name: "web", Count: 1}}}
	st := deploy.LeaseStatus{
		Hosts: []deploy.HostStatus{{Hostname: "a.example.com", Service: "web", Phase: "Ready", Message: "reached"},
			{Hostname: "b.example.com", Service: "web", Phase: "Failed", Message: "ingresses.networking.k8s.io is forbidden: secret detail"}},
		IPs: []deploy.LeasedIPStatus{
			{Service: "web", Endpoint: "pub", Port: 8080, ExternalPort: 80, Protocol: "TCP", IP: "192.0.2.7", Phase: "Assigned", Message: "MetalLB assigned 192.0.2.7"},
			{Service: "web", Endpoint: "pub2", Port: 53, ExternalPort: 53, Protocol: "UDP", Phase: "Pending", Message: "MetalLB cannot assign an address: no available IPs"},
		},
	}
	out := leaseStatusOf(&g, st, deploy.DeploymentState{}, deploy.Routes{}, "provider.example.com")
	if want := map[string][]api.LeasedIP{"web": {{Port: 8080, ExternalPort: 80, Protocol: "TCP", IP: "192.0.2.7"}}}; !reflect.DeepEqual(out.IPs, want) {
		t.Errorf("ips %+v, want %+v", out.IPs, want)
	}
	if len(out.Berth.LeasedIPs) != 2 || out.Berth.LeasedIPs[1].Phase != "Pending" || out.Berth.LeasedIPs[1].Message != st.IPs[1].Message {
		t.Errorf("leased_ips %+v", out.Berth.LeasedIPs)
	}
	if len(out.Berth.Hosts) != 2 || !out.Berth.Hosts[0].Ready || out.Berth.Hosts[1].Ready {
		t.Fatalf("hosts %+v", out.Berth.Hosts)
	}
	if m := out.Berth.Hosts[1].Message; m == st.Hosts[1].Message {
		t.Errorf("a failure's cause reached the tenant: %q", m)
	}
}

// TestLeaseStatusRuns: a service's restarts and how its last run ended reach the
// tenant; a service that never restarted nor ended has no entry.
func TestLeaseStatusRuns(t *testing.T) {
	g := market.ManifestGroup{Name: "g", Services: []market.Service{{Name: "web", Count: 1}, {Name: "db", Count: 1}}}
	at := time.Unix(1800000000, 0).UTC()
	st := deploy.LeaseStatus{Services: []deploy.ServiceStatus{
		{Name: "web", Total: 1, Available: 1, Restarts: 2, LastExit: &deploy.ContainerExit{Pod: "web-1", Container: "web", Reason: "OOMKilled", ExitCode: 137, Time: at}},
		{Name: "db", Total: 1, Available: 1},
	}}
	out := leaseStatusOf(&g, st, deploy.DeploymentState{}, deploy.Routes{}, "provider.example.com")
	want := map[string]api.ServiceRuns{"web": {Restarts: 2, LastExit: &api.ContainerExit{Pod: "web-1", Container: "web", Reason: "OOMKilled", ExitCode: 137, Time: at}}}
	if !reflect.DeepEqual(out.Berth.Runs, want) {
		t.Errorf("service_runs %+v, want %+v", out.Berth.Runs, want)
	}
}
