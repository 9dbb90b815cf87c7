package rpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"

	akashinventoryv1 "berth.dev/berth/api/akash/inventory/v1"
	akashproviderv1 "berth.dev/berth/api/akash/provider/v1"
	k8sresource "berth.dev/berth/api/k8s.io/apimachinery/pkg/api/resource"
	"berth.dev/berth/internal/gateway/status"
)

// akashServer serves Akash's status service, akash.provider.v1.ProviderRPC, from the
// same board as berth's own: Akash Console keeps its StreamStatus open to every
// provider and reads the cluster inventory from it. BidScreening, which berth's
// vendored copy of the service leaves out, answers Unimplemented (as Akash's provider
// does).
type akashServer struct {
	akashproviderv1.UnimplementedProviderRPCServer
	board Board
	// stop is closed when the server stops, ending the streams.
	stop <-chan struct{}
}

// GetStatus implements akashproviderv1.ProviderRPCServer.
func (a *akashServer) GetStatus(context.Context, *emptypb.Empty) (*akashproviderv1.Status, error) {
	st, _, _ := a.board.Get()
	return akashStatus(&st), nil
}

// StreamStatus implements akashproviderv1.ProviderRPCServer: the whole status now,
// then again at each change, until the client goes away or the server stops.
func (a *akashServer) StreamStatus(_ *emptypb.Empty, stream grpc.ServerStreamingServer[akashproviderv1.Status]) error {
	return streamBoard(stream.Context(), a.board, a.stop, func(st *status.Status) error { return stream.Send(akashStatus(st)) })
}

// akashStatus is the status as Akash's provider reports it over gRPC
// (akash-network/provider service.go StatusV1 and cluster/inventory.go getStatusV1;
// docs/gateway.md lists each field and what berth leaves empty). Amounts are
// Kubernetes quantities in decimal SI form, CPU in cores ("1500m"), the rest in
// bytes or units, as Akash formats them.
func akashStatus(s *status.Status) *akashproviderv1.Status {
	inv := &s.Cluster.Inventory
	out := &akashproviderv1.Status{
		Cluster: &akashproviderv1.ClusterStatus{
			Leases: &akashproviderv1.Leases{Active: s.Cluster.Leases},
			Inventory: &akashproviderv1.Inventory{
				Cluster: &akashinventoryv1.Cluster{},
				Reservations: &akashproviderv1.Reservations{
					Pending: akashReservations(inv.Pending),
					Active:  akashReservations(inv.Active),
				},
			},
		},
		BidEngine: &akashproviderv1.BidEngineStatus{Orders: s.BidEngine.Orders},
		Manifest:  &akashproviderv1.ManifestStatus{Deployments: s.Manifest.Deployments},
		Timestamp: timestamppb.New(s.Timestamp.UTC()),
	}
	if s.ClusterPublicHostname != "" {
		out.PublicHostnames = []string{s.ClusterPublicHostname}
	}
	cl := out.Cluster.Inventory.Cluster
	for i := range inv.Available.Nodes {
		cl.Nodes = append(cl.Nodes, akashNode(&inv.Available.Nodes[i]))
	}
	for _, st := range inv.Available.Storage {
		// Allocatable is the class's total, allocated what is used or reserved, so
		// that allocatable − allocated is what a new lease can have.
		total := max(st.Allocatable, st.Size, 0)
		cl.Storage = append(cl.Storage, &akashinventoryv1.Storage{
			Quantity: &akashinventoryv1.ResourcePair{Allocatable: quantity(total), Allocated: quantity(total - max(st.Size, 0))},
			Info:     &akashinventoryv1.StorageInfo{Class: st.Class},
		})
	}
	if ips := inv.Available.LeasedIPs; ips != nil {
		total := max(ips.Total, 0)
		out.Cluster.Inventory.LeasedIp = &akashinventoryv1.ResourcePair{Allocatable: quantity(total), Allocated: quantity(min(max(total-ips.Available, 0), total))}
	}
	return out
}

// akashNode is a node's resources as Akash's inventory reports them: allocatable is
// the node's, allocated is what berth counts as taken on it (pods and the
// reservations placed there); a node that takes no new pods has everything taken.
// Capacity is left empty: berth tracks nodes' allocatable, not their capacity.
func akashNode(n *status.Node) *akashinventoryv1.Node {
	pair := func(allocatable, available int64, q func(int64) *k8sresource.Quantity) *akashinventoryv1.ResourcePair {
		allocatable = max(allocatable, 0)
		return &akashinventoryv1.ResourcePair{Allocatable: q(allocatable), Allocated: q(min(max(allocatable-available, 0), allocatable))}
	}
	a, f := n.Allocatable, n.Available
	return &akashinventoryv1.Node{
		Name: n.Name,
		Resources: &akashinventoryv1.NodeResources{
			Cpu:              &akashinventoryv1.CPU{Quantity: pair(a.CPU, f.CPU, milliQuantity)},
			Memory:           &akashinventoryv1.Memory{Quantity: pair(a.Memory, f.Memory, quantity)},
			Gpu:              &akashinventoryv1.GPU{Quantity: pair(a.GPU, f.GPU, quantity), Info: akashGPUInfo(n)},
			EphemeralStorage: pair(a.StorageEphemeral, f.StorageEphemeral, quantity),
		},
		Capabilities: &akashinventoryv1.NodeCapabilities{},
	}
}

// maxGPUsPerNode bounds the GPU entries listed for one node (the largest servers have
// 16 GPUs; a node claiming more is listed with this many).
const maxGPUsPerNode = 64

// akashGPUInfo is Akash's description of a node's GPUs, one entry per GPU as Akash's
// inventory lists them (vendor, model name, interface, memory); none without GPUs.
func akashGPUInfo(n *status.Node) []*akashinventoryv1.GPUInfo {
	if n.GPU == nil || n.Allocatable.GPU <= 0 {
		return nil
	}
	// A node reporting an absurd count must not make every status message huge.
	count := min(n.Allocatable.GPU, maxGPUsPerNode)
	out := make([]*akashinventoryv1.GPUInfo, 0, count)
	for range count {
		out = append(out, &akashinventoryv1.GPUInfo{Vendor: n.GPU.Vendor, Name: n.GPU.Model, Interface: n.GPU.Interface, MemorySize: n.GPU.RAM})
	}
	return out
}

// akashReservations is Akash's count and summed requests of reservations (Akash's
// ResourcesMetric.AddResourceUnits: persistent storage by class, the rest in
// ephemeral_storage).
func akashReservations(rs []status.Metrics) *akashproviderv1.ReservationsMetric {
	var t status.Metrics
	storage := map[string]int64{}
	for _, r := range rs {
		t.CPU += r.CPU
		t.GPU += r.GPU
		t.Memory += r.Memory
		t.StorageEphemeral += r.StorageEphemeral
		for class, n := range r.Storage {
			storage[class] += n
		}
	}
	m := &akashproviderv1.ResourcesMetric{
		Cpu: milliQuantity(t.CPU), Memory: quantity(t.Memory), Gpu: quantity(t.GPU), EphemeralStorage: quantity(t.StorageEphemeral),
		Storage: make(map[string]*k8sresource.Quantity, len(storage)),
	}
	for class, n := range storage {
		m.Storage[class] = quantity(n)
	}
	return &akashproviderv1.ReservationsMetric{Count: uint32(len(rs)), Resources: m} //nolint:gosec // a count of reservations
}

func quantity(n int64) *k8sresource.Quantity {
	s := resource.NewQuantity(n, resource.DecimalSI).String()
	return &k8sresource.Quantity{String_: &s}
}

func milliQuantity(n int64) *k8sresource.Quantity {
	s := resource.NewMilliQuantity(n, resource.DecimalSI).String()
	return &k8sresource.Quantity{String_: &s}
}
