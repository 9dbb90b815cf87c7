package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/rest"
	"berth.dev/berth/internal/gateway/rpc"
	"berth.dev/berth/internal/gateway/status"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/wait"
)

// gatewayService is the tenant side of the provider: the manifest service, the status
// board and the HTTPS gateway.
type gatewayService struct {
	manifests *manifest.Service
	board     *status.Board
	rest      *rest.Server
	ln        net.Listener
	rpc       *rpc.Server
	rpcLn     net.Listener
	// own is the provider's self-signed certificate, registered on the ledger at
	// start if it is not yet (nil when the gateway does not listen).
	own       *auth.Certificate
	hostname  string
	statusInt time.Duration
	// statusEvery is how often, with bus.redis, the status topics carry the status
	// even when it has not changed (for subscribers that joined or lost events).
	statusEvery time.Duration
}

// newGateway builds the gateway; it listens but serves nothing until run.
func (p *Provider) newGateway(ctx context.Context, reader ledgerReader, prefix string) (*gatewayService, error) {
	cfg := p.cfg
	addr := p.bcast.Address()
	gw := &gatewayService{statusInt: time.Second, statusEvery: 30 * time.Second}
	closeBid := func(ctx context.Context, id market.BidID, reason string) error {
		_, err := p.bcast.Submit(ctx, &ledger.MsgCloseBid{ID: id, Reason: reason})
		return err
	}
	var err error
	if gw.manifests, err = manifest.New(manifest.Config{Provider: addr, Timeout: cfg.Gateway.ManifestTimeout, BlockedHostnames: cfg.Gateway.BlockedHostnames, IngressDomain: cfg.Cluster.IngressDomain},
		reader, p.cluster.manager, closeBid, p.log, p.reg); err != nil {
		return nil, err
	}
	gw.board = status.NewBoard(status.Status{Address: addr, Timestamp: time.Now()})
	if cfg.Gateway.Listen == "" && cfg.Gateway.GRPCListen == "" {
		return gw, nil
	}
	gw.hostname = cfg.Gateway.PublicHostname
	var prov ledger.Provider
	if err := ledger.QueryProvider.Into(ctx, p.client, ledger.ProviderRequest{Owner: addr}, &prov); err == nil && gw.hostname == "" {
		if u, err := url.Parse(prov.HostURI); err == nil {
			gw.hostname = u.Hostname()
		}
	}
	// The provider's own certificate is always made and registered: tenants asking for
	// mtls.<host> get it even when gateway.cert_file serves <host> (auth.ServerCertificates).
	c, err := ownCertificate(filepath.Join(cfg.Home, "provider", "gateway"), addr, gw.hostname)
	if err != nil {
		return nil, err
	}
	gw.own = &c
	certs, err := serverCertificates(c, cfg.Gateway)
	if err != nil {
		return nil, err
	}
	getCert := certs.GetCertificate
	authn, err := auth.NewAuthenticator(reader, prefix, addr)
	if err != nil {
		return nil, err
	}
	build := cfg.Build
	if build.Name == "" {
		build = rest.BuildInfo{Name: "berth", ServerName: "berth-provider", Version: "dev"}
	}
	build.Go = runtime.Version()
	version := rest.Version{Berth: build}
	if v, err := p.cluster.cs.Discovery().ServerVersion(); err == nil {
		version.Kube = v
	}
	streams, err := kube.NewStreams(p.cluster.rc, p.log)
	if err != nil {
		return nil, err
	}
	if gw.rest, err = rest.New(rest.Config{Provider: addr, PublicHostname: gw.hostname, IngressDomain: cfg.Cluster.IngressDomain, IngressHTTPPort: cfg.Cluster.IngressHTTPPort, Version: version, Certificate: getCert},
		rest.Deps{Auth: authn, Manifests: gw.manifests, Deployments: p.cluster.manager, Statuses: p.cluster.monitor, Status: gw.board, Streams: streams,
			Metrics: promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}), Registerer: p.reg, Decisions: p.engine.History()}, p.log); err != nil {
		return nil, err
	}
	if cfg.Gateway.GRPCListen != "" {
		if gw.rpc, err = rpc.New(rpc.Config{Certificate: getCert, AddressPrefix: prefix}, gw.board, p.engine, p.log); err != nil {
			return nil, err
		}
		if gw.rpcLn, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Gateway.GRPCListen); err != nil {
			return nil, fmt.Errorf("gateway.grpc_listen %s: %w", cfg.Gateway.GRPCListen, err)
		}
	}
	if p.early != nil {
		gw.ln, p.early = p.early.handOver(ctx), nil
	} else if cfg.Gateway.Listen != "" {
		if gw.ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Gateway.Listen); err != nil {
			gw.close()
			return nil, fmt.Errorf("gateway.listen %s: %w", cfg.Gateway.Listen, err)
		}
	}
	return gw, nil
}

// close closes the listeners (when the provider does not run after all).
func (gw *gatewayService) close() {
	for _, ln := range []net.Listener{gw.ln, gw.rpcLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// serverCertificates serves own, and the configured certificate (gateway.cert_file)
// for the names it covers.
func serverCertificates(own auth.Certificate, g config.GatewayConfig) (*auth.ServerCertificates, error) {
	tc, err := own.TLS()
	if err != nil {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	var configured *auth.Reloader
	if g.CertFile != "" {
		if configured, err = auth.NewReloader(g.CertFile, g.KeyFile); err != nil {
			return nil, fmt.Errorf("gateway.cert_file: %w", err)
		}
	}
	return auth.NewServerCertificates(tc, configured)
}

// ownCertificate loads the provider's self-signed certificate from dir, or makes one
// (valid a year, for the provider's hostname and loopback) and saves it there.
func ownCertificate(dir, addr, hostname string) (auth.Certificate, error) {
	c, err := auth.LoadCertificate(filepath.Join(dir, auth.CertFile), filepath.Join(dir, auth.KeyFile))
	if err == nil {
		x, xerr := c.X509()
		if xerr == nil && x.Subject.CommonName == addr && time.Until(x.NotAfter) > 7*24*time.Hour {
			return c, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return auth.Certificate{}, fmt.Errorf("gateway certificate in %s: %w", dir, err)
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if hostname != "" {
		hosts = append(hosts, hostname)
	}
	if c, err = auth.NewCertificate(addr, hosts, 365*24*time.Hour); err != nil {
		return auth.Certificate{}, err
	}
	if err := c.Save(dir); err != nil {
		return auth.Certificate{}, err
	}
	return c, nil
}

// run serves the gateway and runs the manifest watchdog and the status board.
func (gw *gatewayService) run(ctx context.Context, g *errgroup.Group, p *Provider) {
	g.Go(func() error { return gw.manifests.Run(ctx) })
	g.Go(func() error { return gw.publishStatus(ctx, p) })
	g.Go(func() error { return p.ledger.Run(ctx) })
	if gw.own != nil {
		g.Go(func() error { return gw.registerCertificate(ctx, p) })
	}
	if gw.rpcLn != nil {
		g.Go(func() error { return gw.rpc.Serve(ctx, gw.rpcLn) })
		p.log.InfoContext(ctx, "gRPC gateway listening", slog.String("address", gw.rpcLn.Addr().String()))
	}
	if gw.ln != nil {
		g.Go(func() error { return gw.rest.Serve(ctx, gw.ln) })
		p.log.InfoContext(ctx, "gateway listening", slog.String("address", "https://"+gw.ln.Addr().String()))
	}
}

// registerCertificate puts the provider's certificate on the ledger unless it is
// there, retrying until it is (tenants' tools trust the server only then).
func (gw *gatewayService) registerCertificate(ctx context.Context, p *Provider) error {
	serial, err := gw.own.Serial()
	if err != nil {
		return fmt.Errorf("gateway certificate: %w", err)
	}
	reader := ledgerReader{p.client}
	err = wait.Retry(ctx, time.Second, time.Minute, func(ctx context.Context) error {
		c, err := reader.Certificate(ctx, p.bcast.Address(), serial)
		switch {
		case err == nil && c.State == ledger.CertValid:
			return nil
		case err == nil:
			return wait.Abort(fmt.Errorf("gateway certificate %s is %s on the ledger: remove %s to make a new one", serial, c.State, "provider/gateway in the home"))
		case errors.Is(err, ledger.ErrNotFound):
			_, err = p.bcast.Submit(ctx, &ledger.MsgCreateCertificate{Owner: p.bcast.Address(), Cert: gw.own.Cert, PubKey: gw.own.PubKey})
			if err == nil {
				p.log.InfoContext(ctx, "gateway certificate registered on the ledger", slog.String("serial", serial))
			}
		}
		return err
	}, func(err error, pause time.Duration) {
		p.log.WarnContext(ctx, "registering the gateway certificate; retrying", slog.String("error", err.Error()), slog.Duration("in", pause))
	})
	if err != nil && ctx.Err() == nil { // not stopping
		return err
	}
	return nil
}

// publishStatus refreshes the status board from the components' memory every
// interval; watchers are woken only when something changed.
func (gw *gatewayService) publishStatus(ctx context.Context, p *Provider) error {
	publish := func(context.Context) { gw.board.Publish(gw.snapshot(p)) }
	publish(ctx)
	wait.Every(ctx, gw.statusInt, publish)
	return nil
}

func (gw *gatewayService) snapshot(p *Provider) status.Status {
	return status.Collect(status.Sources{
		Address: p.bcast.Address(), Hostname: gw.hostname, Version: p.cfg.Build.Version,
		Engine: p.engine, Deployments: p.cluster.manager, Manifests: gw.manifests, Ledger: p.ledger,
		Leases: p.cluster.monitor, Balance: p.balance, Capacity: p.cluster.capacity, Inventory: p.cluster.inv,
	}, time.Now())
}
