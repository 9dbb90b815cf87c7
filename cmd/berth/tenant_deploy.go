package main

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gateway/client"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/sdl"
	"berth.dev/berth/internal/yaml"
)

// deployOptions are `berth tenant deploy`'s flags.
type deployOptions struct {
	provider, deposit        string
	dseq                     uint64
	bidTimeout, readyTimeout time.Duration
	bidWait                  time.Duration
	keep, strict             bool
	gateway                  gatewayFlags
}

// deployResult is what deploy prints with -o json.
type deployResult struct {
	DSeq    uint64          `json:"dseq"`
	Version string          `json:"version"`
	Leases  []deployedLease `json:"leases"`
}

type deployedLease struct {
	ID     market.LeaseID  `json:"id"`
	Price  market.DecCoin  `json:"price"`
	Status api.LeaseStatus `json:"status"`
}

func newTenantDeployCommand(f *ledgerFlags) *cobra.Command {
	var o deployOptions
	cmd := &cobra.Command{
		Use:   "deploy FILE",
		Short: "Deploy an SDL file end to end: deployment, bids, leases, manifest, until ready",
		Long: "deploy runs a tenant's whole journey: it checks the SDL file, creates the deployment\n" +
			"(funding its escrow), waits for providers' bids and shows them, leases the cheapest bid\n" +
			"of each order (or --provider's), sends the manifest to the providers, and waits until\n" +
			"every service is ready; then it prints the services' URIs and forwarded ports.\n\n" +
			"An invalid SDL file fails before anything is written to the ledger. When no bid\n" +
			"comes within --bid-timeout, a provider refuses the manifest (4xx), the manifest is not\n" +
			"delivered or the lease not ready within --ready-timeout, or deploy is interrupted, the\n" +
			"deployment is closed so that its deposit comes back, unless --keep is given.\n\n" +
			"A provider that does not answer (unreachable, restarting: connection refused or reset,\n" +
			"a timeout, a 5xx) is asked again with backoff for as long as --ready-timeout allows,\n" +
			"with a line saying so; that alone never closes the deployment.",
		Args: exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.checkOutput(); err != nil {
				return err
			}
			for name, d := range map[string]time.Duration{"--bid-timeout": o.bidTimeout, "--ready-timeout": o.readyTimeout} {
				if d <= 0 {
					return usageError("%s %s: must be positive", name, d)
				}
			}
			if o.bidWait < 0 {
				return usageError("--bid-wait %s: must not be negative", o.bidWait)
			}
			r, err := readSDL(cmd, args[0], o.strict)
			if err != nil {
				return err
			}
			// What a provider checks of the manifest, checked before the ledger sees it.
			if err := manifest.Validate(r.Manifest); err != nil {
				return fmt.Errorf("%s: %w", displayName(args[0]), err)
			}
			s, err := f.connectWithin(cmd, true)
			if err != nil {
				return err
			}
			defer s.close()
			if o.provider != "" {
				if err := ledger.CheckAddress(o.provider, s.c.Params().AddressPrefix); err != nil {
					return usageError("--provider %q: %w", o.provider, err)
				}
			}
			d := &deployer{f: f, o: &o, s: s, r: r, progress: s.out, start: time.Now()}
			if s.json {
				d.progress = cmd.ErrOrStderr()
			}
			s.say = func(line string) { d.say("%s", line) }
			return d.run(cmd.Context())
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.provider, "provider", "", "lease this provider's bids (default: the cheapest bid of each order)")
	fl.StringVar(&o.deposit, "deposit", "", "escrow deposit, like 5000000uakt (default: the ledger's minimum)")
	fl.Uint64Var(&o.dseq, "dseq", 0, "deployment sequence (default: the current block height)")
	fl.DurationVar(&o.bidTimeout, "bid-timeout", 2*time.Minute, "how long to wait for bids")
	fl.DurationVar(&o.bidWait, "bid-wait", 3*time.Second, "once every order has a bid, how long to wait for other providers' bids")
	fl.DurationVar(&o.readyTimeout, "ready-timeout", 5*time.Minute, "how long to wait for the providers to take the manifest and the leases to be ready")
	fl.BoolVar(&o.keep, "keep", false, "on failure, keep the deployment open (default: close it so the deposit comes back)")
	fl.BoolVar(&o.strict, "strict", false, "treat SDL warnings as errors")
	o.gateway.register(fl)
	return cmd
}

// connectWithin connects for a command that runs longer than --timeout: the
// connection itself is bounded by it.
func (f *ledgerFlags) connectWithin(cmd *cobra.Command, signing bool) (*session, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	return f.connect(ctx, cmd, signing)
}

type deployer struct {
	f        *ledgerFlags
	o        *deployOptions
	s        *session
	r        *sdl.Result
	progress io.Writer
	start    time.Time
	id       market.DeploymentID
	clients  map[string]*client.Client // by provider
}

func (d *deployer) say(format string, a ...any) {
	_, _ = fmt.Fprintf(d.progress, "%6.1fs  "+format+"\n", append([]any{time.Since(d.start).Seconds()}, a...)...)
}

func (d *deployer) run(ctx context.Context) (retErr error) {
	if err := d.create(ctx); err != nil {
		return err
	}
	// From here on, a failure closes the deployment (unless --keep).
	defer func() {
		if retErr == nil {
			return
		}
		if d.o.keep {
			retErr = fmt.Errorf("%w\ndeployment %d is kept open (--keep): close it with `berth tenant close %d`", retErr, d.id.DSeq, d.id.DSeq)
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.f.timeout)
		defer cancel()
		res, err := d.s.br.Broadcast(cctx, &ledger.MsgCloseDeployment{ID: d.id})
		if err != nil {
			retErr = fmt.Errorf("%w\nclosing deployment %d failed too: %w (close it with `berth tenant close %d`)", retErr, d.id.DSeq, err, d.id.DSeq)
			return
		}
		d.say("deployment %d closed in block %d; its escrow balance is back in your account", d.id.DSeq, res.Height)
	}()
	bids, err := d.waitForBids(ctx)
	if err != nil {
		return err
	}
	ids, err := d.lease(ctx, bids)
	if err != nil {
		return err
	}
	// Sending the manifest and waiting for the leases share --ready-timeout: while a
	// provider is unreachable (restarting, say), both keep trying within it.
	d.say("sending the manifest; waiting up to %s for the lease(s) to be ready", yaml.FormatDuration(d.o.readyTimeout))
	ready, cancel := context.WithTimeout(ctx, d.o.readyTimeout)
	defer cancel()
	if err := d.sendManifest(ready, ids); err != nil {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while sending the manifest: %w", err)
		case ready.Err() != nil:
			return fmt.Errorf("the manifest was not delivered within %s: %w", d.o.readyTimeout, err)
		}
		return err
	}
	statuses, err := d.waitReady(ctx, ready, ids)
	if err != nil {
		return err
	}
	return d.report(ids, bids, statuses)
}

// create writes the deployment to the ledger.
func (d *deployer) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.f.timeout)
	defer cancel()
	dseq := d.o.dseq
	if dseq == 0 {
		h, err := d.s.c.Height(ctx)
		if err != nil {
			return err
		}
		dseq = uint64(max(h, 1))
	}
	dep, err := deploymentDeposit(d.s, d.r, d.o.deposit)
	if err != nil {
		return err
	}
	d.id = market.DeploymentID{Owner: d.s.key.Address, DSeq: dseq}
	res, err := d.s.br.Broadcast(ctx, &ledger.MsgCreateDeployment{ID: d.id, Groups: d.r.Groups, Version: d.r.Version, Deposit: dep})
	if err != nil {
		return fmt.Errorf("create deployment %s: %w", d.id, err)
	}
	d.say("deployment %d created in block %d: %d group(s), version %s, deposit %s", dseq, res.Height, len(d.r.Groups), hex.EncodeToString(d.r.Version)[:12], dep)
	return nil
}

// deploymentDeposit is --deposit, else the ledger's minimum in the groups' denomination.
func deploymentDeposit(s *session, r *sdl.Result, flag string) (market.Coin, error) {
	if flag != "" {
		c, err := market.ParseCoin(flag)
		if err != nil {
			return c, usageError("--deposit: %w", err)
		}
		return c, nil
	}
	denom := r.Groups[0].Resources[0].Price.Denom
	for _, c := range s.c.Params().DeploymentMinDeposit {
		if c.Denom == denom {
			return c, nil
		}
	}
	return market.Coin{}, fmt.Errorf("the ledger has no minimum deposit in %s; give --deposit", denom)
}

// waitForBids waits until every order has an open bid (from --provider when given),
// then --bid-wait more for competing bids, and returns the open bids by order.
func (d *deployer) waitForBids(ctx context.Context) (map[market.OrderID][]ledger.Bid, error) {
	d.say("waiting for bids on %d order(s) (up to %s)", len(d.r.Groups), yaml.FormatDuration(d.o.bidTimeout))
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, d.o.bidTimeout)
	defer cancel()
	var settle time.Time
	var byOrder map[market.OrderID][]ledger.Bid // as last read
	for {
		got, err := d.openBids(ctx)
		if err == nil {
			byOrder = got
		}
		complete := len(byOrder) == len(d.r.Groups)
		if err == nil {
			if complete && settle.IsZero() {
				settle = time.Now().Add(d.o.bidWait)
			}
			if complete && !time.Now().Before(settle) {
				d.showBids(byOrder)
				return byOrder, nil
			}
			err = d.nextBlock(ctx)
		}
		if err == nil {
			continue
		}
		// The time for bids may run out during a query as well as between blocks:
		// either way it is the end of the wait, not a failure of the ledger.
		switch {
		case outer.Err() != nil:
			return nil, fmt.Errorf("interrupted while waiting for bids: %w", outer.Err())
		case ctx.Err() != nil && complete:
			d.showBids(byOrder)
			return byOrder, nil
		case ctx.Err() != nil:
			return nil, d.noBids(byOrder)
		}
		return nil, err
	}
}

// nextBlock waits for the ledger's next block.
func (d *deployer) nextBlock(ctx context.Context) error {
	h, err := d.s.c.Height(ctx)
	if err != nil {
		return err
	}
	_, err = d.s.c.WaitHeight(ctx, h+1)
	return err
}

func (d *deployer) openBids(ctx context.Context) (map[market.OrderID][]ledger.Bid, error) {
	all, err := listAll(ctx, d.s, ledger.QueryBids, ledger.BidsRequest{Owner: d.id.Owner, DSeq: d.id.DSeq, State: ledger.BidOpen, Provider: d.o.provider},
		func(r ledger.BidsResponse) []ledger.Bid { return r.Bids })
	if err != nil {
		return nil, fmt.Errorf("bids on deployment %d: %w", d.id.DSeq, err)
	}
	out := map[market.OrderID][]ledger.Bid{}
	for i := range all {
		out[all[i].ID.Order()] = append(out[all[i].ID.Order()], all[i])
	}
	for oid := range out {
		slices.SortFunc(out[oid], func(a, b ledger.Bid) int {
			return cmp.Or(a.Price.Amount.Cmp(b.Price.Amount), strings.Compare(a.ID.Provider, b.ID.Provider))
		})
	}
	return out, nil
}

func (d *deployer) noBids(got map[market.OrderID][]ledger.Bid) error {
	var missing []string
	for i, g := range d.r.Groups {
		found := false
		for oid := range got {
			found = found || int(oid.GSeq) == i+1
		}
		if !found {
			missing = append(missing, fmt.Sprintf("group %q", g.Name))
		}
	}
	who := "any provider"
	if d.o.provider != "" {
		who = d.o.provider
	}
	return fmt.Errorf("no bid from %s within %s for %s: no provider could serve it as asked (resources, attributes, price) — `berth tenant bids %d` lists what came",
		who, d.o.bidTimeout, strings.Join(missing, ", "), d.id.DSeq)
}

func (d *deployer) showBids(byOrder map[market.OrderID][]ledger.Bid) {
	for _, oid := range sortedOrders(byOrder) {
		for i := range byOrder[oid] {
			b := &byOrder[oid][i]
			mark := " "
			if i == 0 {
				mark = "*"
			}
			d.say("  %s bid on %d/%d/%d from %s: %s/block", mark, oid.DSeq, oid.GSeq, oid.OSeq, b.ID.Provider, b.Price.Short())
		}
	}
}

func sortedOrders[T any](m map[market.OrderID]T) []market.OrderID {
	ids := make([]market.OrderID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].GSeq < ids[j].GSeq || ids[i].GSeq == ids[j].GSeq && ids[i].OSeq < ids[j].OSeq
	})
	return ids
}

// lease accepts the chosen (first) bid of every order, in one transaction.
func (d *deployer) lease(ctx context.Context, bids map[market.OrderID][]ledger.Bid) ([]market.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, d.f.timeout)
	defer cancel()
	var msgs []ledger.Msg
	var ids []market.LeaseID
	for _, oid := range sortedOrders(bids) {
		b := bids[oid][0]
		msgs = append(msgs, &ledger.MsgCreateLease{BidID: b.ID})
		ids = append(ids, b.ID.Lease())
	}
	res, err := d.s.br.Broadcast(ctx, msgs...)
	if err != nil {
		return nil, fmt.Errorf("create lease(s): %w", err)
	}
	for _, id := range ids {
		d.say("lease %d/%d/%d created with %s in block %d", id.DSeq, id.GSeq, id.OSeq, id.Provider, res.Height)
	}
	return ids, nil
}

// sendManifest sends the manifest to each provider of the leases, each asked again
// while it does not answer, until ctx ends.
func (d *deployer) sendManifest(ctx context.Context, ids []market.LeaseID) error {
	return sendManifestTo(ctx, d.gateway, ids, d.id.DSeq, d.r.Manifest, func(provider string) error {
		d.say("manifest sent to %s", provider)
		return nil
	})
}

// gateway is a client of the provider's gateway, made once per provider: its
// registration is read from the ledger and its connections are kept for the polls.
func (d *deployer) gateway(ctx context.Context, provider string) (*client.Client, error) {
	if gc, ok := d.clients[provider]; ok {
		return gc, nil
	}
	gc, err := d.o.gateway.gateway(ctx, d.f, d.s, provider)
	if err != nil {
		return nil, err
	}
	if d.clients == nil {
		d.clients = map[string]*client.Client{}
	}
	d.clients[provider] = gc
	return gc, nil
}

// waitReady polls each lease's status on its provider until all are ready, a
// deployment fails, or ctx (--ready-timeout) ends; outer is the command's context. A
// provider that does not answer is asked again meanwhile (see client.Client).
func (d *deployer) waitReady(outer, ctx context.Context, ids []market.LeaseID) (map[market.LeaseID]api.LeaseStatus, error) {
	statuses := map[market.LeaseID]api.LeaseStatus{}
	last := map[market.LeaseID]string{}
	var unanswered error // the last status request the wait's end cut short
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ready := 0
		for _, id := range ids {
			st, err := d.status(ctx, id)
			if err != nil {
				if ctx.Err() != nil {
					unanswered = err
					break
				}
				return nil, err
			}
			statuses[id] = st
			if st.Berth.Phase == "Failed" {
				return nil, fmt.Errorf("lease %s failed on its provider: %s", id, st.Berth.Error)
			}
			if line := progressLine(st); line != last[id] {
				last[id] = line
				d.say("  %d/%d/%d: %s", id.DSeq, id.GSeq, id.OSeq, line)
			}
			if st.Berth.Ready {
				ready++
			}
		}
		if ready == len(ids) {
			return statuses, nil
		}
		select {
		case <-ctx.Done():
			if err := outer.Err(); err != nil {
				return nil, err
			}
			if unanswered != nil {
				return nil, fmt.Errorf("the lease(s) were not ready within %s: %w", d.o.readyTimeout, unanswered)
			}
			return nil, fmt.Errorf("the lease(s) were not ready within %s: %s", d.o.readyTimeout, notReadyReasons(statuses))
		case <-tick.C:
		}
	}
}

func (d *deployer) status(ctx context.Context, id market.LeaseID) (api.LeaseStatus, error) {
	var st api.LeaseStatus
	gc, err := d.gateway(ctx, id.Provider)
	if err != nil {
		return st, err
	}
	raw, err := gc.LeaseStatus(ctx, id)
	if err != nil {
		return st, fmt.Errorf("status of lease %s: %w", id, err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("status of lease %s: %w", id, err)
	}
	return st, nil
}

// progressLine summarises a status: each service's ready replicas.
func progressLine(st api.LeaseStatus) string {
	names := make([]string, 0, len(st.Services))
	for n := range st.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		s := st.Services[n]
		parts = append(parts, fmt.Sprintf("%s %d/%d", n, s.ReadyReplicas, s.Total))
	}
	if len(parts) == 0 {
		parts = append(parts, "no services yet")
	}
	line := strings.Join(parts, ", ")
	if st.Berth.Ready {
		line += " — ready"
	} else if st.Berth.Phase != "" {
		line += " (" + st.Berth.Phase + ")"
	}
	return line
}

func notReadyReasons(statuses map[market.LeaseID]api.LeaseStatus) string {
	var out []string
	for _, id := range sortedLeases(statuses) {
		st := statuses[id]
		if st.Berth.Ready {
			continue
		}
		why := progressLine(st)
		for svc, errs := range st.Berth.Services {
			why += fmt.Sprintf("; %s: %s", svc, strings.Join(errs, ", "))
		}
		out = append(out, fmt.Sprintf("%s: %s", id, why))
	}
	return strings.Join(out, "; ")
}

func sortedLeases[T any](m map[market.LeaseID]T) []market.LeaseID {
	ids := make([]market.LeaseID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b market.LeaseID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

// serviceURL is the URL of a service's URI on an ingress answering on port (0: 80).
func serviceURL(uri string, port int) string {
	if port == 0 || port == 80 {
		return "http://" + uri
	}
	return "http://" + net.JoinHostPort(uri, strconv.Itoa(port))
}

// report prints the ready deployment: per lease its price, services' URIs and
// forwarded ports, and what to run next.
func (d *deployer) report(ids []market.LeaseID, bids map[market.OrderID][]ledger.Bid, statuses map[market.LeaseID]api.LeaseStatus) error {
	res := deployResult{DSeq: d.id.DSeq, Version: hex.EncodeToString(d.r.Version)}
	for _, id := range ids {
		res.Leases = append(res.Leases, deployedLease{ID: id, Price: bids[id.Order()][0].Price, Status: statuses[id]})
	}
	if d.s.json {
		return writeJSON(d.s.out, res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\ndeployment %d is ready (%.1fs)\n", d.id.DSeq, time.Since(d.start).Seconds())
	for i := range res.Leases {
		l := &res.Leases[i]
		fmt.Fprintf(&b, "  lease %d/%d/%d with %s at %s/block\n", l.ID.DSeq, l.ID.GSeq, l.ID.OSeq, l.ID.Provider, l.Price.Short())
		names := make([]string, 0, len(l.Status.Services))
		for n := range l.Status.Services {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			s := l.Status.Services[n]
			fmt.Fprintf(&b, "    %-12s %d/%d ready", n, s.ReadyReplicas, s.Total)
			for _, u := range s.URIs {
				fmt.Fprintf(&b, "  %s", serviceURL(u, l.Status.Berth.IngressHTTPPort))
			}
			for _, p := range l.Status.ForwardedPorts[n] {
				fmt.Fprintf(&b, "  %s:%d → %d/%s", p.Host, p.ExternalPort, p.Port, p.Proto)
			}
			for _, ip := range l.Status.IPs[n] {
				fmt.Fprintf(&b, "  %s:%d → %d/%s", ip.IP, ip.ExternalPort, ip.Port, ip.Protocol)
			}
			b.WriteString("\n")
		}
	}
	self := selfName()
	fmt.Fprintf(&b, "\n  status:  %s tenant lease status %d\n", self, d.id.DSeq)
	fmt.Fprintf(&b, "  logs:    %s tenant lease logs %d\n", self, d.id.DSeq)
	fmt.Fprintf(&b, "  shell:   %s tenant lease shell %d --service NAME -- COMMAND\n", self, d.id.DSeq)
	fmt.Fprintf(&b, "  close:   %s tenant close %d\n", self, d.id.DSeq)
	return writeString(d.s.out, b.String())
}
