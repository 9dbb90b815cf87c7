package rpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	akashproviderv1 "berth.dev/berth/api/akash/provider/v1"
	"berth.dev/berth/api/market/v1"
	providerv1 "berth.dev/berth/api/provider/v1"
	"berth.dev/berth/internal/bidengine"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/auth/authtest"
	"berth.dev/berth/internal/gateway/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// screener bids 5uakt per CPU millicore on groups named "web", and declines the rest.
type screener struct{}

func (screener) Screen(_ context.Context, _ string, spec market.GroupSpec) (bidengine.Screening, error) {
	switch spec.Name {
	case "scripted":
		return bidengine.Screening{Reason: bidengine.ReasonScriptFailed, Detail: `pricing script /etc/berth/price.sh failed: exit status 1; stderr: "secret"`}, nil
	case "web":
	default:
		return bidengine.Screening{Reason: bidengine.ReasonAttributes, Detail: "provider lacks attribute region=eu"}, nil
	}
	return bidengine.Screening{Bid: true, Price: market.DecCoin{Denom: "uakt", Amount: market.NewDec(5)}, Reason: bidengine.ReasonPriced}, nil
}

func start(t *testing.T) (*status.Board, *grpc.ClientConn) {
	t.Helper()
	board, conn, _ := startServer(t)
	return board, conn
}

// startServer serves on a free loopback port; stop ends Serve and returns its error.
func startServer(t *testing.T) (board *status.Board, conn *grpc.ClientConn, stop func() error) {
	t.Helper()
	pc, err := auth.NewCertificate("akash1provider", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc := authtest.TLS(t, pc)
	board = status.NewBoard(status.Status{Address: "akash1provider", Timestamp: time.Now()})
	s, err := New(Config{Certificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tc, nil }, AddressPrefix: "akash"},
		board, screener{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return board, conn, stop
}

func TestStatus(t *testing.T) {
	board, conn := start(t)
	c := providerv1.NewProviderRPCClient(conn)
	st, err := c.GetStatus(t.Context(), &emptypb.Empty{})
	if err != nil || st.GetAddress() != "akash1provider" {
		t.Fatalf("GetStatus: %v %v", st, err)
	}
	stream, err := c.StreamStatus(t.Context(), &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetCluster().GetLeases() != 0 {
		t.Fatalf("first: %v %v", first, err)
	}
	board.Publish(status.Status{Address: "akash1provider", Cluster: status.Cluster{Leases: 4}, Berth: status.Berth{LeasesReady: 3, LeasesNotReady: 1},
		Timestamp: time.Now()})
	next, err := stream.Recv()
	if err != nil || next.GetCluster().GetLeases() != 4 || next.GetCluster().GetLeasesReady() != 3 {
		t.Fatalf("pushed: %v %v", next, err)
	}
}

func TestValidateGroupSpec(t *testing.T) {
	_, conn := start(t)
	c := providerv1.NewProviderRPCClient(conn)
	spec := func(name string) []byte {
		b, _ := json.Marshal(market.GroupSpec{Name: name, Resources: []market.ResourceUnit{{Count: 1, Resources: market.Resources{ID: 1}}}})
		return b
	}
	resp, err := c.ValidateGroupSpec(t.Context(), &providerv1.ValidateGroupSpecRequest{GroupSpecJson: spec("web")})
	if err != nil || !resp.GetBid() || resp.GetPrice().GetAmount() != "5.000000000000000000" || resp.GetPrice().GetDenom() != "uakt" {
		t.Fatalf("web: %v %v", resp, err)
	}
	resp, err = c.ValidateGroupSpec(t.Context(), &providerv1.ValidateGroupSpecRequest{GroupSpecJson: spec("db")})
	if err != nil || resp.GetBid() || resp.GetReason() != bidengine.ReasonAttributes || resp.GetDetail() == "" {
		t.Fatalf("db: %v %v", resp, err)
	}
	resp, err = c.ValidateGroupSpec(t.Context(), &providerv1.ValidateGroupSpecRequest{GroupSpecJson: spec("scripted")})
	if err != nil || resp.GetReason() != bidengine.ReasonScriptFailed || strings.Contains(resp.GetDetail(), "price.sh") || strings.Contains(resp.GetDetail(), "secret") {
		t.Fatalf("script failure: %v %v", resp, err)
	}
	for _, bad := range []*providerv1.ValidateGroupSpecRequest{
		{},
		{GroupSpecJson: []byte(`{"name":"web","resources":[],"extra":1}`)},
		{GroupSpecJson: []byte(`{"name":"","resources":[{"count":1}]}`)},
		{GroupSpecJson: []byte(`{"name":"web","resources":[{"count":0}]}`)},
		{GroupSpecJson: spec("web"), Owner: "not-an-address"},
	} {
		if _, err := c.ValidateGroupSpec(t.Context(), bad); grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", bad.GetGroupSpecJson(), err)
		}
	}
}

func TestHealthAndReflection(t *testing.T) {
	_, conn := start(t)
	services := []string{providerv1.ProviderRPC_ServiceDesc.ServiceName, akashproviderv1.ProviderRPC_ServiceDesc.ServiceName}
	for _, name := range services {
		h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %s: %v %v", name, h, err)
		}
	}
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range r.GetListServicesResponse().GetService() {
		listed[s.GetName()] = true
	}
	for _, name := range []string{"berth.provider.v1.ProviderRPC", "akash.provider.v1.ProviderRPC"} {
		if !listed[name] {
			t.Fatalf("reflection lists %v, not %s", r.GetListServicesResponse().GetService(), name)
		}
	}
	_ = rc.CloseSend()
}
