package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/gateway/client"
	"berth.dev/berth/internal/manifest"
)

// certDir is where a key's client certificate is kept.
func certDir(home, key string) string { return filepath.Join(home, "tenant", "certs", key) }

// gatewayFlags choose how to authenticate to providers.
type gatewayFlags struct {
	auth string
}

func (g *gatewayFlags) register(flags *pflag.FlagSet) {
	flags.StringVar(&g.auth, "auth", "auto", "how to authenticate to the provider: cert (the client certificate from `berth tenant cert create`), token (a bearer token signed by the key), or auto (cert if there is one)")
}

// providerGateway is the client of the provider named by the command's optional
// ADDRESS argument, by default the --from key's own provider.
func (g *gatewayFlags) providerGateway(ctx context.Context, f *ledgerFlags, s *session, args []string) (string, *client.Client, error) {
	addr := s.key.Address
	if len(args) == 1 {
		addr = args[0]
	}
	gc, err := g.gateway(ctx, f, s, addr)
	return addr, gc, err
}

// gateway connects to a provider's gateway as the session's tenant.
func (g *gatewayFlags) gateway(ctx context.Context, f *ledgerFlags, s *session, provider string) (*client.Client, error) {
	var prov ledger.Provider
	if err := ledger.QueryProvider.Into(ctx, s.c, ledger.ProviderRequest{Owner: provider}, &prov); err != nil {
		return nil, fmt.Errorf("provider %s: %w", provider, err)
	}
	opts := client.Options{HostURI: prov.HostURI, Provider: provider, Timeout: f.timeout, OnRetry: retryNotice(provider, s.say),
		Certs: func(ctx context.Context, owner, serial string) (ledger.Certificate, error) {
			var resp ledger.CertificatesResponse
			if err := ledger.QueryCertificates.Into(ctx, s.c, ledger.CertificatesRequest{Owner: owner, Serial: serial}, &resp); err != nil {
				return ledger.Certificate{}, err
			}
			for _, c := range resp.Certificates {
				if c.Serial == serial {
					return c, nil
				}
			}
			return ledger.Certificate{}, ledger.ErrNotFound
		}}
	dir := certDir(f.home, f.from)
	switch g.auth {
	case "cert", "auto":
		c, err := auth.LoadCertificate(filepath.Join(dir, auth.CertFile), filepath.Join(dir, auth.KeyFile))
		switch {
		case err == nil:
			tc, err := c.TLS()
			if err != nil {
				return nil, err
			}
			opts.ClientCert = &tc
		case g.auth == "cert" || !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("client certificate in %s: %w (make one with `berth tenant cert create`)", dir, err)
		}
	case "token":
	default:
		return nil, usageError("--auth %q: want cert, token or auto", g.auth)
	}
	if opts.ClientCert == nil {
		if s.priv.Type() != ledger.KeySecp256k1 {
			return nil, fmt.Errorf("key %s is %s; bearer tokens need a secp256k1 key (or use a client certificate)", f.from, s.priv.Type())
		}
		opts.Signer, opts.Tenant = s.priv, s.key.Address
	}
	gc, err := client.New(opts)
	if err != nil {
		return nil, err
	}
	s.gateways = append(s.gateways, gc)
	return gc, nil
}

// retryNotice tells the user that a provider does not answer and is asked again: at
// a request's first retry, then every tenth.
func retryNotice(provider string, say func(string)) func(attempt int, err error, pause time.Duration) {
	return func(attempt int, err error, pause time.Duration) {
		if attempt == 1 || attempt%10 == 0 {
			say(fmt.Sprintf("provider %s unreachable (%v); retrying in %s (attempt %d), until the wait ends", provider, err, pause.Round(10*time.Millisecond), attempt+1))
		}
	}
}

func newCertCommand(f *ledgerFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Client certificates for providers' gateways (mTLS)"}
	var valid time.Duration
	var force bool
	var fromPEM string
	create := &cobra.Command{
		Use:   "create [--from-pem FILE]",
		Short: "Make a client certificate for the key (or take one made elsewhere), register it on the ledger and keep it in the home",
		Long: "create makes a self-signed P-256 client certificate for the key's address, registers it on\n" +
			"the ledger and keeps it (with its key) in the home, where the tenant commands find it.\n" +
			"With --from-pem it takes a certificate made elsewhere instead, e.g. the <address>.pem that\n" +
			"`akash tx cert generate client` writes: the file's certificate is checked (self-signed\n" +
			"P-256, subject CN the key's address, valid now, for client authentication) and registered;\n" +
			"its private key, when the file has one (unencrypted, or encrypted by Akash's tools, which\n" +
			"the key that made it decrypts), must be the certificate's and is kept like a made one's.\n" +
			"Nothing is kept unless the ledger registered the certificate (or already had it).",
		Args: exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var pemData []byte
			if fromPEM != "" {
				if cmd.Flags().Changed("valid") {
					return usageError("--valid is for a certificate berth makes; a --from-pem certificate keeps its own validity")
				}
				var err error
				if pemData, err = readPEMFile(fromPEM); err != nil {
					return err
				}
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				dir := certDir(f.home, f.from)
				if pemData != nil {
					return certFromPEM(ctx, s, dir, fromPEM, pemData, force)
				}
				if _, err := os.Stat(filepath.Join(dir, auth.CertFile)); err == nil && !force {
					return usageError("%s already holds a certificate for %s: revoke it with `berth tenant cert revoke SERIAL`, or pass --force to replace it", dir, f.from)
				}
				c, err := auth.NewCertificate(s.key.Address, nil, valid)
				if err != nil {
					return err
				}
				serial, err := c.Serial()
				if err != nil {
					return err
				}
				res, err := s.br.Broadcast(ctx, &ledger.MsgCreateCertificate{Owner: s.key.Address, Cert: c.Cert, PubKey: c.PubKey})
				if err != nil {
					return fmt.Errorf("register certificate %s: %w", serial, err)
				}
				if err := c.Save(dir); err != nil {
					return fmt.Errorf("certificate %s is registered but could not be saved (revoke it): %w", serial, err)
				}
				if s.json {
					return writeJSON(s.out, map[string]any{"serial": serial, "dir": dir, "height": res.Height})
				}
				return writeString(s.out, fmt.Sprintf("certificate %s registered in block %d, saved in %s\n", serial, res.Height, dir))
			})
		}),
	}
	create.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificate is valid")
	create.Flags().BoolVar(&force, "force", false, "replace the certificate kept in the home (the old one stays registered until revoked)")
	create.Flags().StringVar(&fromPEM, "from-pem", "", "register the certificate in this PEM `FILE` (made elsewhere, e.g. by Akash's tx cert generate client) and keep it with its private key, if the file has it")
	revoke := &cobra.Command{
		Use:   "revoke SERIAL",
		Short: "Revoke one of the key's certificates: providers refuse it from then on",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				res, err := s.br.Broadcast(ctx, &ledger.MsgRevokeCertificate{Owner: s.key.Address, Serial: args[0]})
				if err != nil {
					return fmt.Errorf("revoke certificate %s: %w", args[0], err)
				}
				return s.report("revoke certificate", res)
			})
		}),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the key's certificates on the ledger",
		Args:  exactArgs(0),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return f.with(cmd, false, func(ctx context.Context, s *session) error {
				all, err := listAll(ctx, s, ledger.QueryCertificates, ledger.CertificatesRequest{Owner: s.key.Address},
					func(r ledger.CertificatesResponse) []ledger.Certificate { return r.Certificates })
				if err != nil {
					return err
				}
				return printList(s, all, []string{"SERIAL", "STATE"}, func(c *ledger.Certificate) []string { return []string{c.Serial, c.State} })
			})
		}),
	}
	cmd.AddCommand(create, revoke, list)
	return cmd
}

// providersOf lists the providers of the deployment's active leases (one provider
// when --provider names it).
func providersOf(ctx context.Context, s *session, dseq uint64, only string) ([]market.LeaseID, error) {
	all, err := leases(ctx, s, ledger.LeasesRequest{Owner: s.key.Address, DSeq: dseq, Provider: only, State: ledger.LeaseActive})
	if err != nil {
		return nil, err
	}
	out := make([]market.LeaseID, 0, len(all))
	for i := range all {
		out = append(out, all[i].Lease.ID)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("deployment %d has no active lease%s (see `berth tenant leases --dseq %d`)", dseq, map[bool]string{true: " with " + only, false: ""}[only != ""], dseq)
	}
	return out, nil
}

func newDeploymentUpdateCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var strict, noSend bool
	cmd := &cobra.Command{
		Use:   "update FILE DSEQ",
		Short: "Update a deployment to a new SDL file: record its version, then send its manifest to the providers",
		Long: "update records the SDL file's manifest version on the deployment and sends the manifest\n" +
			"to the providers of its active leases, which apply it in place. The groups' resources\n" +
			"and prices cannot change (that needs a new deployment): the providers refuse a manifest\n" +
			"that does not fit the leased groups, and the deployment keeps the new version; send a\n" +
			"fitting manifest, or the previous file's version again.",
		Args: exactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			r, err := readSDL(cmd, args[0], strict)
			if err != nil {
				return err
			}
			if err := manifest.Validate(r.Manifest); err != nil {
				return fmt.Errorf("%s: %w", displayName(args[0]), err)
			}
			dseq, err := parseDSeq(args[1])
			if err != nil {
				return err
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				id := market.DeploymentID{Owner: s.key.Address, DSeq: dseq}
				var d ledger.DeploymentResponse
				if err := ledger.QueryDeployment.Into(ctx, s.c, ledger.DeploymentRequest{ID: id}, &d); err != nil {
					return fmt.Errorf("deployment %d: %w", dseq, err)
				}
				if err := sameGroups(d.Groups, r.Groups); err != nil {
					return fmt.Errorf("%s cannot update deployment %d: %w", displayName(args[0]), dseq, err)
				}
				if !bytes.Equal(d.Deployment.Version, r.Version) {
					res, err := s.br.Broadcast(ctx, &ledger.MsgUpdateDeployment{ID: id, Version: r.Version})
					if err != nil {
						return fmt.Errorf("update deployment %d: %w", dseq, err)
					}
					if err := s.report("update deployment", res); err != nil {
						return err
					}
				}
				if noSend {
					return nil
				}
				return sendManifest(ctx, f, &g, s, dseq, r.Manifest, "")
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().BoolVar(&strict, "strict", false, "treat SDL warnings as errors")
	cmd.Flags().BoolVar(&noSend, "no-send", false, "only record the version on the ledger (send the manifest later with send-manifest)")
	return cmd
}

// sameGroups checks that an SDL file's groups are the deployment's: a deployment
// update changes the manifest, not what was ordered.
func sameGroups(have []ledger.Group, want []market.GroupSpec) error {
	if len(have) != len(want) {
		return fmt.Errorf("it has %d group(s), the deployment %d", len(want), len(have))
	}
	for i := range want {
		a, err := json.Marshal(have[i].Spec)
		if err != nil {
			return err
		}
		b, err := json.Marshal(want[i])
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("group %q differs from the deployment's (resources, counts, prices and placement must stay as ordered; close the deployment and create a new one)", want[i].Name)
		}
	}
	return nil
}

func newSendManifestCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var provider string
	var strict bool
	cmd := &cobra.Command{
		Use:   "send-manifest FILE DSEQ",
		Short: "Send the SDL file's manifest to the providers of the deployment's leases",
		Args:  exactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			r, err := readSDL(cmd, args[0], strict)
			if err != nil {
				return err
			}
			dseq, err := parseDSeq(args[1])
			if err != nil {
				return err
			}
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				var d ledger.DeploymentResponse
				if err := ledger.QueryDeployment.Into(ctx, s.c, ledger.DeploymentRequest{ID: market.DeploymentID{Owner: s.key.Address, DSeq: dseq}}, &d); err != nil {
					return fmt.Errorf("deployment %d: %w", dseq, err)
				}
				if !bytes.Equal(d.Deployment.Version, r.Version) {
					return fmt.Errorf("%s is not the file deployment %d was created or last updated with (version %x, the deployment has %x)", args[0], dseq, r.Version, d.Deployment.Version)
				}
				return sendManifest(ctx, f, &g, s, dseq, r.Manifest, provider)
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "only this provider (default: every provider with an active lease of the deployment)")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat SDL warnings as errors")
	return cmd
}

// sendManifest sends m to each provider of the deployment's active leases (only
// provider when given) and says which took it.
func sendManifest(ctx context.Context, f *ledgerFlags, g *gatewayFlags, s *session, dseq uint64, m market.Manifest, provider string) error {
	ids, err := providersOf(ctx, s, dseq, provider)
	if err != nil {
		return err
	}
	connect := func(ctx context.Context, provider string) (*client.Client, error) {
		return g.gateway(ctx, f, s, provider)
	}
	return sendManifestTo(ctx, connect, ids, dseq, m, func(provider string) error {
		return writeString(s.out, fmt.Sprintf("manifest sent to %s\n", provider))
	})
}

// sendManifestTo sends m to each provider of ids once (connect reaches its gateway),
// calls sent for each that takes it, and returns the refusals together.
func sendManifestTo(ctx context.Context, connect func(context.Context, string) (*client.Client, error), ids []market.LeaseID,
	dseq uint64, m market.Manifest, sent func(provider string) error,
) error {
	done := map[string]bool{}
	var failed []string
	for _, id := range ids {
		if done[id.Provider] {
			continue
		}
		done[id.Provider] = true
		gc, err := connect(ctx, id.Provider)
		if err == nil {
			err = gc.SendManifest(ctx, dseq, m)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", id.Provider, err))
			continue
		}
		if err := sent(id.Provider); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return errors.New("manifest not accepted by\n  " + strings.Join(failed, "\n  "))
	}
	return nil
}

// leaseRef resolves DSEQ/GSEQ/OSEQ (or DSEQ alone) and --provider to one active lease.
func leaseRef(ctx context.Context, s *session, ref, provider string) (market.LeaseID, error) {
	parts := strings.Split(ref, "/")
	dseq, err := parseDSeq(parts[0])
	if err != nil {
		return market.LeaseID{}, err
	}
	ids, err := providersOf(ctx, s, dseq, provider)
	if err != nil {
		return market.LeaseID{}, err
	}
	if len(parts) == 3 {
		oid, err := parseOrderRef(s.key.Address, ref)
		if err != nil {
			return market.LeaseID{}, err
		}
		ids = filterLeases(ids, func(id market.LeaseID) bool { return id.Order() == oid })
	} else if len(parts) != 1 {
		return market.LeaseID{}, usageError("%q: want DSEQ or DSEQ/GSEQ/OSEQ", ref)
	}
	switch len(ids) {
	case 0:
		return market.LeaseID{}, fmt.Errorf("no active lease %s", ref)
	case 1:
		return ids[0], nil
	}
	return market.LeaseID{}, usageError("deployment %d has %d active leases: name one as DSEQ/GSEQ/OSEQ, with --provider if needed", dseq, len(ids))
}

func filterLeases(ids []market.LeaseID, keep func(market.LeaseID) bool) []market.LeaseID {
	out := ids[:0]
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

func newLeaseStatusCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var provider, service string
	cmd := &cobra.Command{
		Use:   "status DSEQ[/GSEQ/OSEQ]",
		Short: "Show a lease's status on its provider: services, replicas, URIs, forwarded ports",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				id, err := leaseRef(ctx, s, args[0], provider)
				if err != nil {
					return err
				}
				gc, err := g.gateway(ctx, f, s, id.Provider)
				if err != nil {
					return err
				}
				if service != "" {
					raw, err := gc.ServiceStatus(ctx, id, service)
					if err != nil {
						return err
					}
					return writeString(s.out, string(raw)+"\n")
				}
				raw, err := gc.LeaseStatus(ctx, id)
				if err != nil {
					return err
				}
				if s.json {
					return writeString(s.out, string(raw)+"\n")
				}
				return printLeaseStatus(s, id, raw)
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "the lease's provider (needed when the deployment has leases with several)")
	cmd.Flags().StringVar(&service, "service", "", "one service's status (JSON)")
	return cmd
}

// printLeaseStatus prints a lease's status as text.
func printLeaseStatus(s *session, id market.LeaseID, raw []byte) error {
	var st api.LeaseStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("lease status: %w", err)
	}
	var b strings.Builder
	state := "not ready"
	if st.Berth.Ready {
		state = "ready"
	}
	fmt.Fprintf(&b, "lease %d/%d/%d on %s: %s", id.DSeq, id.GSeq, id.OSeq, id.Provider, state)
	if st.Berth.Phase != "" {
		fmt.Fprintf(&b, " (%s)", st.Berth.Phase)
	}
	b.WriteString("\n")
	if st.Berth.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", st.Berth.Error)
	}
	names := slices.Sorted(maps.Keys(st.Services))
	for _, n := range names {
		svc := st.Services[n]
		fmt.Fprintf(&b, "  %-20s %d/%d available", n, svc.Available, svc.Total)
		if len(svc.URIs) > 0 {
			fmt.Fprintf(&b, "  %s", strings.Join(svc.URIs, ", "))
		}
		b.WriteString("\n")
		for _, p := range st.ForwardedPorts[n] {
			fmt.Fprintf(&b, "    %s:%d -> %d/%s\n", p.Host, p.ExternalPort, p.Port, strings.ToLower(p.Proto))
		}
		for _, e := range st.Berth.Services[n] {
			fmt.Fprintf(&b, "    ! %s\n", e)
		}
		if r, ok := st.Berth.Runs[n]; ok {
			fmt.Fprintf(&b, "    restarts %d", r.Restarts)
			if e := r.LastExit; e != nil {
				fmt.Fprintf(&b, "; last exit: %s, code %d, %s/%s at %s", e.Reason, e.ExitCode, e.Pod, e.Container, e.Time.UTC().Format(time.RFC3339))
			}
			b.WriteString("\n")
		}
		for _, h := range st.Berth.Hosts {
			if h.Service != n {
				continue
			}
			phase := cmp.Or(h.Phase, "waiting")
			fmt.Fprintf(&b, "    host %s: %s", h.Hostname, strings.ToLower(phase))
			if h.Phase != berthv1.HostRouted && h.Phase != berthv1.HostReady && h.Message != "" {
				fmt.Fprintf(&b, " (%s)", h.Message)
			}
			b.WriteString("\n")
		}
	}
	return writeString(s.out, b.String())
}

// leaseGateway resolves a lease reference and connects to its provider's gateway.
func leaseGateway(ctx context.Context, f *ledgerFlags, g *gatewayFlags, s *session, ref, provider string) (market.LeaseID, *client.Client, error) {
	id, err := leaseRef(ctx, s, ref, provider)
	if err != nil {
		return id, nil, err
	}
	gc, err := g.gateway(ctx, f, s, id.Provider)
	return id, gc, err
}

// withStream runs fn with a ledger session but without --timeout's deadline (streams
// last as long as they are followed); connecting keeps the deadline.
func (f *ledgerFlags) withStream(cmd *cobra.Command, fn func(ctx context.Context, s *session) error) error {
	cctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	s, err := f.connect(cctx, cmd, true)
	cancel()
	if err != nil {
		return err
	}
	defer s.close()
	return fn(cmd.Context(), s)
}

func newLeaseLogsCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var provider string
	var services []string
	var follow, previous bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs DSEQ[/GSEQ/OSEQ]",
		Short: "Print a lease's container logs (each line prefixed with its pod)",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.withStream(cmd, func(ctx context.Context, s *session) error {
				id, gc, err := leaseGateway(ctx, f, &g, s, args[0], provider)
				if err != nil {
					return err
				}
				if previous && follow {
					return usageError("--previous, --follow: a container's ended run writes no more; use one or the other")
				}
				return gc.Logs(ctx, id, client.LogOptions{Services: services, Follow: follow, Tail: tail, Previous: previous}, func(m api.LogMessage) error {
					if s.json {
						return writeJSON(s.out, m)
					}
					return writeString(s.out, "["+m.Name+"] "+m.Message+"\n")
				})
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "the lease's provider (needed when the deployment has leases with several)")
	cmd.Flags().StringSliceVar(&services, "service", nil, "only these services (comma-separated)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().IntVar(&tail, "tail", -1, "start with each container's last N lines (-1: all)")
	cmd.Flags().BoolVar(&previous, "previous", false, "the containers' runs before their last restart (why one crashed), not their current ones")
	return cmd
}

func newLeaseEventsCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var provider string
	var follow bool
	cmd := &cobra.Command{
		Use:   "events DSEQ[/GSEQ/OSEQ]",
		Short: "Print a lease's Kubernetes events",
		Args:  exactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.withStream(cmd, func(ctx context.Context, s *session) error {
				id, gc, err := leaseGateway(ctx, f, &g, s, args[0], provider)
				if err != nil {
					return err
				}
				return gc.Events(ctx, id, follow, func(e api.LeaseEvent) error {
					if s.json {
						return writeJSON(s.out, e)
					}
					return writeString(s.out, fmt.Sprintf("%-8s %-20s %s/%s: %s\n", e.Type, e.Reason, strings.ToLower(e.Object.Kind), e.Object.Name, e.Note))
				})
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "the lease's provider (needed when the deployment has leases with several)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	return cmd
}

func newLeaseShellCommand(f *ledgerFlags) *cobra.Command {
	var g gatewayFlags
	var provider, service string
	var podIndex int
	var tty, stdin bool
	cmd := &cobra.Command{
		Use:   "shell DSEQ[/GSEQ/OSEQ] --service NAME [--tty] [--stdin] -- COMMAND [ARG...]",
		Short: "Run a command in one of a service's pods; exits with the command's exit code",
		Long: "shell runs a command in one of a service's pods and exits with its exit code. A shell\n" +
			"that fails says why on standard error and exits non-zero: with the command's exit code\n" +
			"when it ran and failed (\"command terminated with exit code N\", as kubectl exec), with 1\n" +
			"when it could not run or the connection ended without a result.",
		Args: cobra.MinimumNArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if service == "" {
				return usageError("--service is required")
			}
			return f.withStream(cmd, func(ctx context.Context, s *session) error {
				id, gc, err := leaseGateway(ctx, f, &g, s, args[0], provider)
				if err != nil {
					return err
				}
				o := client.ShellOptions{Command: args[1:], Service: service, PodIndex: podIndex, TTY: tty,
					Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
				if stdin {
					o.Stdin = cmd.InOrStdin()
				}
				restore, resize, err := terminal(cmd, tty)
				if err != nil {
					return err
				}
				defer restore()
				o.Resize = resize
				code, err := gc.Shell(ctx, id, o)
				switch {
				case err != nil:
					return err
				case code != 0: // as kubectl exec says it
					return &exitError{code: code, err: fmt.Errorf("command terminated with exit code %d", code)}
				}
				return nil
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "the lease's provider (needed when the deployment has leases with several)")
	cmd.Flags().StringVar(&service, "service", "", "the service whose pod runs the command")
	cmd.Flags().IntVar(&podIndex, "pod-index", 0, "which of the service's running pods (by name order)")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "allocate a terminal (puts this one in raw mode)")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "send this command's standard input")
	return cmd
}

// newLeaseMigrateCommand moves hostnames or leased-IP endpoints to a lease of another
// of the tenant's deployments on the same provider.
func newLeaseMigrateCommand(f *ledgerFlags, what string) *cobra.Command {
	var g gatewayFlags
	var provider string
	cmd := &cobra.Command{
		Use:   "migrate-" + what + " DSEQ[/GSEQ/OSEQ] NAME...",
		Short: fmt.Sprintf("Move %s to this lease from your other deployments on its provider", what),
		Long: fmt.Sprintf("migrate-%s gives the named %s to the lease DSEQ[/GSEQ/OSEQ] (its manifest must\n", what, what) +
			"use them), taking them from whichever of your deployments on the same provider has\n" +
			"them, as Akash's provider-services migrate-" + what + " does. A leased-IP endpoint keeps its\n" +
			"address; a hostname's route moves.",
		Args: minArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, true, func(ctx context.Context, s *session) error {
				id, gc, err := leaseGateway(ctx, f, &g, s, args[0], provider)
				if err != nil {
					return err
				}
				migrate := gc.MigrateEndpoints
				if what == "hostnames" {
					migrate = gc.MigrateHostnames
				}
				moved, err := migrate(ctx, args[1:], id.DSeq, id.GSeq)
				if err != nil {
					return err
				}
				if s.json {
					b, err := json.Marshal(api.Transferred{Transferred: moved})
					if err != nil {
						return err
					}
					return writeString(s.out, string(b)+"\n")
				}
				return writeString(s.out, fmt.Sprintf("moved to lease %d/%d/%d: %s\n", id.DSeq, id.GSeq, id.OSeq, strings.Join(moved, ", ")))
			})
		}),
	}
	g.register(cmd.Flags())
	cmd.Flags().StringVar(&provider, "provider", "", "the lease's provider (needed when the deployment has leases with several)")
	return cmd
}
