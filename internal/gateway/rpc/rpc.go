// Package rpc is the gateway's gRPC transport (port 8444): berth's service
// berth.provider.v1.ProviderRPC (GetStatus, StreamStatus pushing each change, and
// ValidateGroupSpec: the bid engine's decision on a group, reserving nothing), Akash's
// status service akash.provider.v1.ProviderRPC (GetStatus and StreamStatus, read by
// Akash Console), gRPC health and reflection. Every
// answer comes from memory: the status board and the bid engine's capacity; nothing
// reaches Kubernetes or the ledger. A Server is safe for concurrent use.
package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	akashproviderv1 "berth.dev/berth/api/akash/provider/v1"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/httpjson"
)

// Board is the status snapshot (status.Board).
type Board interface {
	Get() (status.Status, []byte, <-chan struct{})
}

// Screener runs the bid engine's decision on a group (bidengine.Engine).
type Screener interface {
	Screen(ctx context.Context, owner string, spec market.GroupSpec) (bidengine.Screening, error)
}

// Config configures the server.
type Config struct {
	// Certificate serves the provider's certificate.
	Certificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// AddressPrefix checks the owner of ValidateGroupSpec requests.
	AddressPrefix string
}

// MaxGroupSpecBytes bounds ValidateGroupSpec's group.
const MaxGroupSpecBytes = 256 << 10

// Limits: screenings at once (each may run the pricing script, whose slots real
// bidding needs), connections, and streams per connection.
const (
	maxScreenings  = 2
	maxConnections = 1024
	maxStreams     = 64
)

// Server implements providerv1.ProviderRPCServer.
type Server struct {
	providerv1.UnimplementedProviderRPCServer
	cfg     Config
	board   Board
	screen  Screener
	log     *slog.Logger
	screens chan struct{}
	// stop is closed when Serve's context ends: streams end then, so that the
	// graceful stop does not wait for them.
	stop     chan struct{}
	stopOnce sync.Once
}

// New returns the server; Serve starts it.
func New(cfg Config, board Board, screen Screener, log *slog.Logger) (*Server, error) {
	if cfg.Certificate == nil || cfg.AddressPrefix == "" || board == nil || screen == nil || log == nil {
		return nil, errors.New("grpc gateway: certificate, address prefix, status board, screener and logger are required")
	}
	return &Server{cfg: cfg, board: board, screen: screen, log: log, screens: make(chan struct{}, maxScreenings), stop: make(chan struct{})}, nil
}

// Serve serves on ln until ctx ends, then stops gracefully: status streams end at
// once, other calls get 5 s. Serve is called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: s.cfg.Certificate})
	srv := grpc.NewServer(grpc.Creds(creds), grpc.MaxRecvMsgSize(MaxGroupSpecBytes+4096), grpc.MaxConcurrentStreams(maxStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}))
	providerv1.RegisterProviderRPCServer(srv, s)
	akashproviderv1.RegisterProviderRPCServer(srv, &akashServer{board: s.board, stop: s.stop})
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(providerv1.ProviderRPC_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(akashproviderv1.ProviderRPC_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(netutil.LimitListener(ln, maxConnections)) }()
	select {
	case err := <-errc:
		// The listener failed, but connections already accepted are still served:
		// end their streams and close them before returning.
		s.stopOnce.Do(func() { close(s.stop) })
		srv.Stop()
		return fmt.Errorf("grpc gateway: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown()
	s.stopOnce.Do(func() { close(s.stop) })
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc gateway: %w", err)
	}
	return nil
}

// GetStatus implements providerv1.ProviderRPCServer.
func (s *Server) GetStatus(context.Context, *emptypb.Empty) (*providerv1.Status, error) {
	st, _, _ := s.board.Get()
	return toProto(&st), nil
}

// StreamStatus implements providerv1.ProviderRPCServer: the status now, then each
// change, until the client goes away.
func (s *Server) StreamStatus(_ *emptypb.Empty, stream grpc.ServerStreamingServer[providerv1.Status]) error {
	return streamBoard(stream.Context(), s.board, s.stop, func(st *status.Status) error { return stream.Send(toProto(st)) })
}

// streamBoard sends the board's status now and again at each change, until ctx ends
// (the client went away) or stop is closed (the server stops).
func streamBoard(ctx context.Context, board Board, stop <-chan struct{}, send func(*status.Status) error) error {
	for {
		st, _, changed := board.Get()
		if err := send(&st); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case <-changed:
		}
	}
}

// ValidateGroupSpec implements providerv1.ProviderRPCServer.
func (s *Server) ValidateGroupSpec(ctx context.Context, req *providerv1.ValidateGroupSpecRequest) (*providerv1.ValidateGroupSpecResponse, error) {
	spec, err := decodeGroupSpec(req.GetGroupSpecJson())
	if err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	if o := req.GetOwner(); o != "" {
		if err := ledger.CheckAddress(o, s.cfg.AddressPrefix); err != nil {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "owner %q is not an account address", o)
		}
	}
	select {
	case s.screens <- struct{}{}:
		defer func() { <-s.screens }()
	default:
		return nil, grpcstatus.Error(codes.ResourceExhausted, "too many groups being screened at once; try again")
	}
	sc, err := s.screen.Screen(ctx, req.GetOwner(), spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, grpcstatus.FromContextError(ctx.Err()).Err()
		}
		s.log.WarnContext(ctx, "screen a group", slog.String("error", err.Error()))
		return nil, grpcstatus.Error(codes.Internal, "the provider could not screen the group")
	}
	detail := sc.Detail
	switch sc.Reason {
	case bidengine.ReasonError, bidengine.ReasonScriptFailed, bidengine.ReasonScriptOutput:
		// The operator's script and its output, or an internal error: for the log.
		s.log.InfoContext(ctx, "group screened: pricing failed", slog.String("reason", sc.Reason), slog.String("detail", sc.Detail))
		detail = "the provider's pricing did not give a price"
	}
	resp := &providerv1.ValidateGroupSpecResponse{Bid: sc.Bid, Reason: sc.Reason, Detail: detail}
	if sc.Bid {
		resp.Price = &providerv1.DecCoin{Denom: sc.Price.Denom, Amount: sc.Price.Amount.String()}
	}
	return resp, nil
}

// decodeGroupSpec reads a group as the ledger encodes it and checks its shape.
func decodeGroupSpec(b []byte) (market.GroupSpec, error) {
	var spec market.GroupSpec
	if len(b) == 0 {
		return spec, errors.New("group_spec_json is empty")
	}
	if len(b) > MaxGroupSpecBytes {
		return spec, fmt.Errorf("group_spec_json is %d bytes, more than %d", len(b), MaxGroupSpecBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&spec); err != nil {
		return spec, fmt.Errorf("group_spec_json: %s", httpjson.DecodeProblem(err))
	}
	if d.More() {
		return spec, errors.New("group_spec_json: data after the group")
	}
	switch {
	case spec.Name == "":
		return spec, errors.New("group_spec_json: the group has no name")
	case len(spec.Resources) == 0:
		return spec, errors.New("group_spec_json: the group has no resource units")
	}
	for i, ru := range spec.Resources {
		if ru.Count == 0 {
			return spec, fmt.Errorf("group_spec_json: resource unit %d has count 0", i)
		}
	}
	return spec, nil
}

func resources(m status.Metrics) *providerv1.Resources {
	return &providerv1.Resources{CpuMillis: m.CPU, MemoryBytes: m.Memory, EphemeralStorageBytes: m.StorageEphemeral, Gpus: m.GPU}
}

func sum(ms []status.Metrics) status.Metrics {
	var t status.Metrics
	for _, m := range ms {
		t.CPU += m.CPU
		t.GPU += m.GPU
		t.Memory += m.Memory
		t.StorageEphemeral += m.StorageEphemeral
	}
	return t
}

func counts(m map[string]int) map[string]uint32 {
	out := make(map[string]uint32, len(m))
	for k, v := range m {
		out[k] = uint32(max(v, 0)) //nolint:gosec // counts
	}
	return out
}

func toProto(s *status.Status) *providerv1.Status {
	out := &providerv1.Status{
		Address:   s.Address,
		Timestamp: timestamppb.New(s.Timestamp),
		Version:   s.Berth.Version,
		Cluster: &providerv1.ClusterStatus{
			Leases:         s.Cluster.Leases,
			LeasesReady:    uint32(max(s.Berth.LeasesReady, 0)),    //nolint:gosec // counts
			LeasesNotReady: uint32(max(s.Berth.LeasesNotReady, 0)), //nolint:gosec // counts
			Inventory: &providerv1.Inventory{
				Active:  &providerv1.Reservations{Count: uint32(max(s.Berth.ReservationsActive, 0)), Resources: resources(sum(s.Cluster.Inventory.Active))},   //nolint:gosec // counts
				Pending: &providerv1.Reservations{Count: uint32(max(s.Berth.ReservationsPending, 0)), Resources: resources(sum(s.Cluster.Inventory.Pending))}, //nolint:gosec // counts
			},
		},
		BidEngine: &providerv1.BidEngineStatus{Orders: s.BidEngine.Orders, OrdersByState: counts(s.Berth.Orders)},
		Manifest: &providerv1.ManifestStatus{Deployments: s.Manifest.Deployments, Waiting: uint32(max(s.Berth.ManifestsWaiting, 0)), //nolint:gosec // counts
			DeploymentsByPhase: counts(s.Berth.Deployments)},
	}
	if s.ClusterPublicHostname != "" {
		out.PublicHostnames = []string{s.ClusterPublicHostname}
	}
	for _, n := range s.Cluster.Inventory.Available.Nodes {
		out.Cluster.Inventory.Nodes = append(out.Cluster.Inventory.Nodes, &providerv1.Node{Name: n.Name, Allocatable: resources(n.Allocatable), Available: resources(n.Available)})
	}
	for _, st := range s.Cluster.Inventory.Available.Storage {
		out.Cluster.Inventory.Storage = append(out.Cluster.Inventory.Storage, &providerv1.StorageClass{Class: st.Class, AvailableBytes: st.Size})
	}
	return out
}
