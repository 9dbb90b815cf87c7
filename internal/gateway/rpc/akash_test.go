package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	akashinventoryv1 "berth.dev/berth/api/akash/inventory/v1"
	akashproviderv1 "berth.dev/berth/api/akash/provider/v1"
	k8sresource "berth.dev/berth/api/k8s.io/apimachinery/pkg/api/resource"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
	"berth.dev/berth/internal/gateway/status"
)

var snapshotTime = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// knownStatus is a provider with two nodes (one cordoned), a storage class, two
// active reservations, one pending, three leases and two orders.
func knownStatus() status.Status {
	return status.Status{
		Address: "akash1provider", ClusterPublicHostname: "provider.example.com", Timestamp: snapshotTime,
		Cluster: status.Cluster{Leases: 3, Inventory: status.Inventory{
			Active: []status.Metrics{
				{CPU: 1500, GPU: 1, Memory: 2e9, StorageEphemeral: 1e9, Storage: map[string]int64{"beta2": 10e9}},
				{CPU: 500, Memory: 500e6, Storage: map[string]int64{"beta2": 5e9, "beta3": 1e9}},
			},
			Pending: []status.Metrics{{CPU: 250, Memory: 1e9, StorageEphemeral: 2e9}},
			Available: status.Available{
				Nodes: []status.Node{
					{Name: "node-a", Allocatable: status.Metrics{CPU: 8000, GPU: 2, Memory: 32e9, StorageEphemeral: 100e9},
						Available: status.Metrics{CPU: 6500, GPU: 1, Memory: 29.5e9, StorageEphemeral: 99e9}},
					{Name: "node-b", Allocatable: status.Metrics{CPU: 4000, Memory: 16e9, StorageEphemeral: 50e9}, Unschedulable: true},
				},
				Storage: []status.Storage{{Class: "beta2", Size: 100e9}},
			},
		}},
		BidEngine: status.BidEngine{Orders: 2},
		Manifest:  status.Manifest{Deployments: 3},
		Berth:     status.Berth{Version: "v1.2.3"},
	}
}

func q(s string) *k8sresource.Quantity { return &k8sresource.Quantity{String_: proto.String(s)} }

func pair(allocatable, allocated string) *akashinventoryv1.ResourcePair {
	return &akashinventoryv1.ResourcePair{Allocatable: q(allocatable), Allocated: q(allocated)}
}

func node(name string, cpu, gpu, mem, eph *akashinventoryv1.ResourcePair) *akashinventoryv1.Node {
	return &akashinventoryv1.Node{Name: name, Resources: &akashinventoryv1.NodeResources{
		Cpu: &akashinventoryv1.CPU{Quantity: cpu}, Gpu: &akashinventoryv1.GPU{Quantity: gpu}, Memory: &akashinventoryv1.Memory{Quantity: mem},
		EphemeralStorage: eph}, Capabilities: &akashinventoryv1.NodeCapabilities{}}
}

func metric(cpu, gpu, mem, eph string, storage map[string]string) *akashproviderv1.ResourcesMetric {
	m := &akashproviderv1.ResourcesMetric{Cpu: q(cpu), Gpu: q(gpu), Memory: q(mem), EphemeralStorage: q(eph), Storage: map[string]*k8sresource.Quantity{}}
	for class, v := range storage {
		m.Storage[class] = q(v)
	}
	return m
}

// knownAkashStatus is knownStatus as Akash's provider reports it.
func knownAkashStatus() *akashproviderv1.Status {
	return &akashproviderv1.Status{
		PublicHostnames: []string{"provider.example.com"},
		Timestamp:       timestamppb.New(snapshotTime),
		BidEngine:       &akashproviderv1.BidEngineStatus{Orders: 2},
		Manifest:        &akashproviderv1.ManifestStatus{Deployments: 3},
		Cluster: &akashproviderv1.ClusterStatus{
			Leases: &akashproviderv1.Leases{Active: 3},
			Inventory: &akashproviderv1.Inventory{
				Cluster: &akashinventoryv1.Cluster{
					Nodes: []*akashinventoryv1.Node{
						node("node-a", pair("8", "1500m"), pair("2", "1"), pair("32G", "2500M"), pair("100G", "1G")),
						node("node-b", pair("4", "4"), pair("0", "0"), pair("16G", "16G"), pair("50G", "50G")),
					},
					Storage: []*akashinventoryv1.Storage{{Quantity: pair("100G", "0"), Info: &akashinventoryv1.StorageInfo{Class: "beta2"}}},
				},
				Reservations: &akashproviderv1.Reservations{
					Active:  &akashproviderv1.ReservationsMetric{Count: 2, Resources: metric("2", "1", "2500M", "1G", map[string]string{"beta2": "15G", "beta3": "1G"})},
					Pending: &akashproviderv1.ReservationsMetric{Count: 1, Resources: metric("250m", "0", "1G", "2G", nil)},
				},
			},
		},
	}
}

func sameStatus(t *testing.T, what string, got, want *akashproviderv1.Status) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, prototext.Format(got), prototext.Format(want))
	}
}

// TestAkashStatus dials the server with a client generated from Akash's protos.
func TestAkashStatus(t *testing.T) {
	board, conn := start(t)
	board.Publish(knownStatus())
	c := akashproviderv1.NewProviderRPCClient(conn)

	got, err := c.GetStatus(t.Context(), &emptypb.Empty{})
	if err != nil {
		t.Fatalf("GetStatus: %v", err)
	}
	sameStatus(t, "GetStatus", got, knownAkashStatus())

	stream, err := c.StreamStatus(t.Context(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("StreamStatus first message: %v", err)
	}
	sameStatus(t, "StreamStatus on connect", first, knownAkashStatus())

	next := knownStatus()
	next.Cluster.Leases = 4
	next.Cluster.Inventory.Pending = append(next.Cluster.Inventory.Pending, status.Metrics{CPU: 1000, GPU: 1, Memory: 1e9, Storage: map[string]int64{"beta3": 2e9}})
	next.Timestamp = snapshotTime.Add(time.Minute)
	if !board.Publish(next) {
		t.Fatal("the board saw no change")
	}
	second, err := stream.Recv()
	if err != nil {
		t.Fatalf("StreamStatus after a change: %v", err)
	}
	want := knownAkashStatus()
	want.Cluster.Leases.Active = 4
	want.Cluster.Inventory.Reservations.Pending = &akashproviderv1.ReservationsMetric{Count: 2,
		Resources: metric("1250m", "1", "2G", "2G", map[string]string{"beta3": "2G"})}
	want.Timestamp = timestamppb.New(snapshotTime.Add(time.Minute))
	sameStatus(t, "StreamStatus after a change", second, want)

	// berth's own service answers on the same server, from the same board.
	own, err := providerv1.NewProviderRPCClient(conn).GetStatus(t.Context(), &emptypb.Empty{})
	if err != nil || own.GetAddress() != "akash1provider" || own.GetCluster().GetLeases() != 4 || own.GetVersion() != "v1.2.3" {
		t.Fatalf("berth GetStatus: %v %v", own, err)
	}

	// BidScreening is not served (as on Akash's provider).
	err = conn.Invoke(t.Context(), "/akash.provider.v1.ProviderRPC/BidScreening", &emptypb.Empty{}, &emptypb.Empty{})
	if grpcstatus.Code(err) != codes.Unimplemented {
		t.Fatalf("BidScreening: %v, want Unimplemented", err)
	}
}

// TestStatusStreamsEndWhenServerStops: both services' streams end cleanly (EOF, not
// a broken connection) as soon as the server stops.
func TestStatusStreamsEndWhenServerStops(t *testing.T) {
	_, conn, stop := startServer(t)
	akash, err := akashproviderv1.NewProviderRPCClient(conn).StreamStatus(t.Context(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	own, err := providerv1.NewProviderRPCClient(conn).StreamStatus(t.Context(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := akash.Recv(); err != nil {
		t.Fatalf("akash first message: %v", err)
	}
	if _, err := own.Recv(); err != nil {
		t.Fatalf("berth first message: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := akash.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("akash stream after stop: %v, want EOF", err)
	}
	if _, err := own.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("berth stream after stop: %v, want EOF", err)
	}
}

func TestAkashStatusMapping(t *testing.T) {
	empty := metric("0", "0", "0", "0", nil)
	for _, tc := range []struct {
		name string
		in   status.Status
		want *akashproviderv1.Status
	}{{
		// Console reads only messages that have cluster.inventory: it is always there.
		name: "nothing yet",
		in:   status.Status{Address: "akash1provider", Timestamp: snapshotTime},
		want: &akashproviderv1.Status{Timestamp: timestamppb.New(snapshotTime),
			BidEngine: &akashproviderv1.BidEngineStatus{}, Manifest: &akashproviderv1.ManifestStatus{},
			Cluster: &akashproviderv1.ClusterStatus{Leases: &akashproviderv1.Leases{}, Inventory: &akashproviderv1.Inventory{
				Cluster: &akashinventoryv1.Cluster{},
				Reservations: &akashproviderv1.Reservations{Active: &akashproviderv1.ReservationsMetric{Resources: empty},
					Pending: &akashproviderv1.ReservationsMetric{Resources: empty}}}}},
	}, {
		name: "quantities and clamping",
		in: status.Status{Timestamp: snapshotTime.In(time.FixedZone("CEST", 2*3600)), Cluster: status.Cluster{Inventory: status.Inventory{Available: status.Available{
			Nodes: []status.Node{
				// binary-sized memory has no exact decimal suffix; more available than
				// allocatable is nothing allocated
				{Name: "n1", Allocatable: status.Metrics{CPU: 1500, Memory: 16 << 30, StorageEphemeral: 1000}, Available: status.Metrics{CPU: 1500, Memory: 17 << 30, StorageEphemeral: 1}},
				// negative amounts never reach Akash
				{Name: "n2", Allocatable: status.Metrics{CPU: -1, GPU: 8}, Available: status.Metrics{GPU: -2}},
			},
			Storage: []status.Storage{{Class: "ram", Size: -5}},
		}}}},
		want: &akashproviderv1.Status{Timestamp: timestamppb.New(snapshotTime),
			BidEngine: &akashproviderv1.BidEngineStatus{}, Manifest: &akashproviderv1.ManifestStatus{},
			Cluster: &akashproviderv1.ClusterStatus{Leases: &akashproviderv1.Leases{}, Inventory: &akashproviderv1.Inventory{
				Cluster: &akashinventoryv1.Cluster{
					Nodes: []*akashinventoryv1.Node{
						node("n1", pair("1500m", "0"), pair("0", "0"), pair("17179869184", "0"), pair("1k", "999")),
						node("n2", pair("0", "0"), pair("8", "8"), pair("0", "0"), pair("0", "0")),
					},
					Storage: []*akashinventoryv1.Storage{{Quantity: pair("0", "0"), Info: &akashinventoryv1.StorageInfo{Class: "ram"}}},
				},
				Reservations: &akashproviderv1.Reservations{Active: &akashproviderv1.ReservationsMetric{Resources: empty},
					Pending: &akashproviderv1.ReservationsMetric{Resources: empty}}}}},
	}, {
		// A GPU node names its GPUs (one entry each, as Akash's inventory lists them),
		// a storage class its total and what is taken, the leased IP pool its size.
		name: "gpu models, storage totals, leased IPs",
		in: status.Status{Timestamp: snapshotTime, Cluster: status.Cluster{Inventory: status.Inventory{Available: status.Available{
			Nodes: []status.Node{{Name: "g1", Allocatable: status.Metrics{GPU: 2}, Available: status.Metrics{GPU: 1},
				GPU: &status.GPUModel{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}}},
			Storage:   []status.Storage{{Class: "beta3", Size: 60, Allocatable: 100}},
			LeasedIPs: &status.Pool{Total: 4, Available: 1},
		}}}},
		want: func() *akashproviderv1.Status {
			g := node("g1", pair("0", "0"), pair("2", "1"), pair("0", "0"), pair("0", "0"))
			a100 := &akashinventoryv1.GPUInfo{Vendor: "nvidia", Name: "a100", Interface: "sxm", MemorySize: "80Gi"}
			g.Resources.Gpu.Info = []*akashinventoryv1.GPUInfo{a100, a100}
			return &akashproviderv1.Status{Timestamp: timestamppb.New(snapshotTime),
				BidEngine: &akashproviderv1.BidEngineStatus{}, Manifest: &akashproviderv1.ManifestStatus{},
				Cluster: &akashproviderv1.ClusterStatus{Leases: &akashproviderv1.Leases{}, Inventory: &akashproviderv1.Inventory{
					Cluster: &akashinventoryv1.Cluster{
						Nodes:   []*akashinventoryv1.Node{g},
						Storage: []*akashinventoryv1.Storage{{Quantity: pair("100", "40"), Info: &akashinventoryv1.StorageInfo{Class: "beta3"}}},
					},
					LeasedIp: pair("4", "3"),
					Reservations: &akashproviderv1.Reservations{Active: &akashproviderv1.ReservationsMetric{Resources: empty},
						Pending: &akashproviderv1.ReservationsMetric{Resources: empty}}}}}
		}(),
	}, {
		name: "known snapshot",
		in:   knownStatus(),
		want: knownAkashStatus(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sameStatus(t, "akashStatus", akashStatus(&tc.in), tc.want)
		})
	}
}

// failingListener accepts connections until fail is closed; then Accept fails, as a
// listener whose socket broke.
type failingListener struct {
	net.Listener
	fail chan struct{}
}

func (l failingListener) Accept() (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	got := make(chan res, 1)
	go func() { c, err := l.Listener.Accept(); got <- res{c, err} }()
	select {
	case r := <-got:
		return r.c, r.err
	case <-l.fail:
		_ = l.Close() // ends the Accept above
		return nil, errors.New("listener broken")
	}
}

// TestStatusStreamsEndWhenListenerFails: when the listener fails, Serve returns its
// error only after the connections it had accepted are closed, so a status stream
// (Console keeps one open to every provider) ends instead of outliving the server.
func TestStatusStreamsEndWhenListenerFails(t *testing.T) {
	pc, err := auth.NewCertificate("akash1provider", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc := authtest.TLS(t, pc)
	board := status.NewBoard(status.Status{Address: "akash1provider", Timestamp: time.Now()})
	s, err := New(Config{Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tc, nil }, AddressPrefix: "akash"},
		board, screener{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := failingListener{Listener: inner, fail: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context(), ln) }()
	conn, err := grpc.NewClient(inner.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := akashproviderv1.NewProviderRPCClient(conn).StreamStatus(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first message: %v", err)
	}
	close(ln.fail)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "listener broken") {
		t.Fatalf("Serve = %v, want the listener's error", err)
	}
	// Ended by the server closing it, not by the client giving up at its deadline.
	if _, err := stream.Recv(); err == nil || grpcstatus.Code(err) == codes.DeadlineExceeded || ctx.Err() != nil {
		t.Fatalf("the stream outlived the server: %v", err)
	}
}
