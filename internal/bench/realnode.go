package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/app"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/localenv"
	"berth.dev/berth/internal/operator/hostname"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/wait"
)

// RealLeaseBench configures RunRealLeaseBench.
type RealLeaseBench struct {
	// Leases is how many leases are measured, one after the other, after one that
	// warms the path up (its image is cached from the start).
	Leases int
	// Timeout bounds each lease's wait for its first answer, and its teardown.
	Timeout time.Duration
	// BinDir, ImagesDir and IngressDir are where the binaries, the images' programs
	// and the ingress controller are; empty: found as tests find them.
	BinDir, ImagesDir, IngressDir string
}

// DefaultRealLeaseBench is `berth bench real-lease` without flags.
func DefaultRealLeaseBench() RealLeaseBench {
	return RealLeaseBench{Leases: 20, Timeout: 2 * time.Minute}
}

// Validate names the first setting out of range.
func (b RealLeaseBench) Validate() error {
	switch {
	case b.Leases < 1 || b.Leases > 1000:
		return fmt.Errorf("--leases: %d is outside 1–1000", b.Leases)
	case b.Timeout <= 0:
		return fmt.Errorf("--timeout: %s is not positive", b.Timeout)
	}
	return nil
}

// realBenchImage is the echo image the benchmark's leases run.
const realBenchImage = "berth.local/echo:bench"

const realBenchSDL = `
version: "2.0"
services:
  echo:
    image: ` + realBenchImage + `
    expose:
      - port: 8080
        as: 80
        to: [{global: true}]
profiles:
  compute:
    echo:
      resources: {cpu: {units: 0.1}, memory: {size: 64Mi}, storage: {size: 256Mi}}
  placement:
    dc:
      pricing:
        echo: {denom: uakt, amount: 100}
deployment:
  echo: {dc: {profile: echo, count: 1}}
`

// RunRealLeaseBench measures, on a real node (containerd, runc, the kubelet), the time
// from a lease's manifest handed to the provider to the first HTTP answer of its
// container through the ingress controller: the provider's cluster service writes the
// objects, the scheduler and the kubelet start the pod (its image already present),
// the hostname operator makes the route, Traefik serves it. Leases run one at a time,
// each torn down before the next. It prints `name value unit` lines: p50, p99 and
// max of the first answer and of the provider's own readiness (its monitor seeing every
// replica available). It needs what localenv.StartRealNode needs.
func RunRealLeaseBench(ctx context.Context, b RealLeaseBench, out io.Writer, log *slog.Logger) (_ []Result, retErr error) {
	if err := b.Validate(); err != nil {
		return nil, config.Invalid(err)
	}
	if err := b.find(ctx); err != nil {
		return nil, err
	}
	res, _, err := sdl.Parse([]byte(realBenchSDL), sdl.Options{})
	if err != nil {
		return nil, fmt.Errorf("benchmark SDL: %w", err)
	}
	quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
	cp, err := localenv.StartControlPlane(ctx, localenv.ControlPlaneOptions{BinDir: b.BinDir, Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	log.InfoContext(ctx, "starting the real node and the ingress controller")
	if _, err := cp.StartRealNode(ctx, localenv.RealNodeOptions{ImagesDir: b.ImagesDir,
		Images: []localenv.Image{localenv.EchoImage(realBenchImage, b.ImagesDir)}}); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(cp.Dir, "bench.kubeconfig")
	if err := localenv.WriteFlatKubeconfig(cp.KubeconfigPath, kubeconfig); err != nil {
		return nil, err
	}
	ingDir := filepath.Join(cp.Dir, "ingress")
	if err := os.MkdirAll(ingDir, 0o700); err != nil {
		return nil, fmt.Errorf("ingress controller: %w", err)
	}
	ing, err := localenv.StartIngressController(ctx, localenv.IngressControllerOptions{Kubeconfig: kubeconfig, Dir: ingDir,
		BinDir: b.IngressDir, IngressClass: hostname.DefaultConfig().Ingress.Class, Restart: localenv.RestartPolicy{Max: -1}})
	if err != nil {
		return nil, err
	}
	defer ing.Stop()

	track := newReadiness()
	active := func(context.Context, market.LeaseID) (bool, error) { return true, nil }
	svc, err := app.NewClusterSide(cp.RESTConfig(), config.DefaultProviderConfig(), benchOwner, active, track.observe, quiet)
	if err != nil {
		return nil, err
	}
	demand, err := svc.Demand(res.Groups[0])
	if err != nil {
		return nil, fmt.Errorf("benchmark SDL: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	defer func() {
		stop()
		if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) && retErr == nil {
			retErr = err
		}
	}()
	svc.Start(gctx, g, true, quiet)
	if err := svc.WaitStarted(gctx); err != nil {
		return nil, fmt.Errorf("cluster service did not start: %w", err)
	}
	// The hostname operator makes the leases' routes, once the CRDs it watches are in.
	hc := hostname.DefaultConfig()
	hc.Provider, hc.ChainID, hc.Kubeconfig, hc.Listen = benchOwner.Provider, benchOwner.ChainID, kubeconfig, "127.0.0.1:0"
	hc.Health.Mode = hostname.HealthNone
	hc.LeaderElection.Disabled = true
	op, err := app.NewHostnameOperator(hc, quiet, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.Close() }()
	g.Go(func() error { return op.Run(gctx) })

	r := &leaseBench{out: out, track: track}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var answered, ready []time.Duration
	for i := range b.Leases + 1 {
		id := market.LeaseID{Owner: "akash1bench", DSeq: uint64(i + 1), GSeq: 1, OSeq: 1, Provider: benchOwner.Provider}
		if _, err := svc.Capacity().Reserve(id.Order(), demand); err != nil {
			return nil, fmt.Errorf("reserve lease %d: %w", i+1, err)
		}
		host := fmt.Sprintf("lease-%d.bench.test", i+1)
		start := time.Now()
		if err := track.deliver(gctx, svc.Manager(), id, res.Version, withHost(res.Manifest[0], host)); err != nil {
			return nil, err
		}
		if err := firstAnswer(gctx, client, ing.HTTPAddr, host, b.Timeout); err != nil {
			return nil, fmt.Errorf("lease %d: %w", i+1, err)
		}
		took := time.Since(start)
		if err := track.wait(gctx, "lease ready", b.Timeout, func() int { return len(track.sent) - len(track.ready) }); err != nil {
			return nil, err
		}
		if i > 0 { // the first warms up: the operator's caches, Traefik's provider
			answered = append(answered, took)
			ready = append(ready, track.latencies([]market.LeaseID{id})...)
		}
		log.InfoContext(ctx, "lease answered", slog.Int("lease", i+1), slog.Duration("took", took))
		svc.Manager().LeaseClosed(id)
		svc.Capacity().Unreserve(id.Order())
		if err := waitTornDown(gctx, svc.Manager(), b.Timeout); err != nil {
			return nil, err
		}
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"real_first_answer", answered}, {"real_ready", ready}} {
		slices.Sort(m.d)
		for _, q := range []struct {
			suffix string
			p      float64
		}{{"p50", 0.5}, {"p99", 0.99}, {"max", 1}} {
			if err := r.emit(fmt.Sprintf("%s_%s", m.name, q.suffix), quantile(m.d, q.p).Seconds(), "s"); err != nil {
				return nil, err
			}
		}
	}
	return r.results, nil
}

// find fills in the directories left empty, as the tests find them.
func (b *RealLeaseBench) find(ctx context.Context) error {
	var err error
	if b.BinDir == "" {
		if b.BinDir, err = localenv.FindBinaries(ctx); err != nil {
			return err
		}
	}
	if err := localenv.CheckRealNodeHost(b.BinDir); err != nil {
		return err
	}
	if b.ImagesDir == "" {
		if b.ImagesDir, err = localenv.FindImages(ctx); err != nil {
			return err
		}
	}
	if b.IngressDir == "" {
		b.IngressDir, err = localenv.FindIngressController(ctx)
	}
	return err
}

// withHost is g with host accepted by its first service's first port.
func withHost(g market.ManifestGroup, host string) market.ManifestGroup {
	g.Services = slices.Clone(g.Services)
	g.Services[0].Expose = slices.Clone(g.Services[0].Expose)
	g.Services[0].Expose[0].Hosts = []string{host}
	return g
}

// firstAnswer waits until the ingress at addr answers GET / for host with the echo
// program's page, asking every 10 ms.
func firstAnswer(ctx context.Context, c *http.Client, addr, host string, timeout time.Duration) error {
	err := wait.Within(ctx, timeout, 10*time.Millisecond, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", http.NoBody)
		if err != nil {
			return wait.Abort(err)
		}
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "hostname: ") {
			return fmt.Errorf("%s answered %s", host, resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("first answer for %s: %w", host, err)
	}
	return nil
}
