package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/gateway/auth"
	"berth.dev/berth/internal/httpjson"
	"berth.dev/berth/internal/manifest"
)

// submitTimeout bounds a manifest submission (ledger queries and the durable record).
const submitTimeout = 2 * time.Minute

// submitDrain is how long a submission under way may go on once the provider stops
// (or the tenant hangs up): long enough to record the manifest and answer.
const submitDrain = 30 * time.Second

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, s.cfg.Version)
}

func (s *Server) address(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, api.Address{Address: s.cfg.Provider})
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	httpjson.Raw(w, http.StatusOK, s.deps.Status.StatusJSON())
}

// putManifest accepts the deployment's manifest: 200 with an empty body once every
// lease of the deployment with this provider has it, durably (as Akash answers, but
// Akash answers before the manifest is anywhere but in memory). A provider stopping
// meanwhile lets the submission finish (Serve waits for it, up to submitDrain).
func (s *Server) putManifest(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	s.submissions.Add(1)
	defer s.submissions.Done()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, manifest.MaxBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(w, r, badRequest(fmt.Sprintf("manifest larger than %d bytes", manifest.MaxBytes)))
			return
		}
		s.writeError(w, r, badRequest("could not read the request body"))
		return
	}
	m, err := manifest.Decode(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), submitTimeout)
	defer cancel()
	var drain *time.Timer
	defer context.AfterFunc(r.Context(), func() { drain = time.AfterFunc(submitDrain, cancel) })()
	defer func() {
		if drain != nil {
			drain.Stop()
		}
	}()
	if err := s.deps.Manifests.Submit(ctx, id.Owner, id.DSeq, m); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// maxMigrationBytes bounds a migration request.
const maxMigrationBytes = 64 << 10

// migration is a decoded migration request.
type migration struct {
	names      []string
	dseq       uint64
	gseq       uint32
	what       string // "hostname", "endpoint"
	validName  func(string) bool
	invalidMsg string
}

// migrate authenticates, reads and checks a migration, and runs do with the tenant and
// the names; the answer is {"transferred": [...]}.
func (s *Server) migrate(w http.ResponseWriter, r *http.Request, scope auth.Scope, decode func(*json.Decoder) (migration, error),
	do func(owner string, m migration) ([]string, error)) {
	who, err := s.deps.Auth.Authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMigrationBytes))
	d.DisallowUnknownFields()
	m, err := decode(d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case len(m.names) == 0:
		s.writeError(w, r, badRequest(m.what+"s to migrate: none given"))
		return
	case m.dseq == 0 || m.gseq == 0:
		s.writeError(w, r, badRequest("destination_dseq and destination_gseq must be positive"))
		return
	}
	for _, n := range m.names {
		if !m.validName(n) {
			s.writeError(w, r, badRequest(fmt.Sprintf("%s %q %s", m.what, n, m.invalidMsg)))
			return
		}
	}
	if !who.Allows(scope, market.LeaseID{Owner: who.Owner, DSeq: m.dseq}) {
		s.writeError(w, r, forbidden(fmt.Sprintf("your credentials do not grant %q on deployment %d", scope, m.dseq)))
		return
	}
	moved, err := do(who.Owner, m)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if moved == nil {
		moved = []string{}
	}
	httpjson.Write(w, http.StatusOK, api.Transferred{Transferred: moved})
}

// migrateHostnames moves hostnames between the tenant's deployments: the destination
// lease's manifest must list them, and no other tenant may hold them.
func (s *Server) migrateHostnames(w http.ResponseWriter, r *http.Request) {
	s.migrate(w, r, auth.ScopeHostnameMigrate, func(d *json.Decoder) (migration, error) {
		var req api.HostnameMigration
		if err := d.Decode(&req); err != nil {
			return migration{}, badRequest(`body: want {"hostnames_to_migrate": [...], "destination_dseq": N, "destination_gseq": N}`)
		}
		return migration{names: req.Hostnames, dseq: req.DestinationDSeq, gseq: req.DestinationGSeq, what: "hostname",
			validName: market.ValidHostPattern, invalidMsg: "is not a valid lowercase DNS name (or a wildcard *.name.tld)"}, nil
	}, func(owner string, m migration) ([]string, error) {
		return s.deps.Deployments.MigrateHostnames(owner, m.names, m.dseq, m.gseq)
	})
}

// migrateEndpoints routes the tenant's leased-IP endpoints to another of its
// deployments, whose manifest must expose ports on them.
func (s *Server) migrateEndpoints(w http.ResponseWriter, r *http.Request) {
	s.migrate(w, r, auth.ScopeIPMigrate, func(d *json.Decoder) (migration, error) {
		var req api.EndpointMigration
		if err := d.Decode(&req); err != nil {
			return migration{}, badRequest(`body: want {"endpoints_to_migrate": [...], "destination_dseq": N, "destination_gseq": N}`)
		}
		return migration{names: req.Endpoints, dseq: req.DestinationDSeq, gseq: req.DestinationGSeq, what: "endpoint",
			validName: market.ValidEndpointName, invalidMsg: "is not a valid endpoint name"}, nil
	}, func(owner string, m migration) ([]string, error) {
		return s.deps.Deployments.MigrateEndpoints(owner, m.names, m.dseq, m.gseq)
	})
}

// leaseGroup is the group a lease runs, or a 404.
func (s *Server) leaseGroup(id market.LeaseID) (market.ManifestGroup, error) {
	_, g, ok := s.deps.Deployments.Manifest(id)
	if !ok {
		return g, notFound(fmt.Sprintf("lease %d/%d/%d: no such lease with this provider, or no manifest sent for it yet", id.DSeq, id.GSeq, id.OSeq))
	}
	return g, nil
}

func (s *Server) leaseStatus(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	g, err := s.leaseGroup(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, _ := s.deps.Statuses.Status(id)
	dep, _ := s.deps.Deployments.State(id)
	out := leaseStatusOf(&g, st, dep, s.deps.Deployments.Routes(id), s.cfg.PublicHostname)
	out.Berth.IngressHTTPPort = s.cfg.IngressHTTPPort
	httpjson.Write(w, http.StatusOK, out)
}

func (s *Server) serviceStatus(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	g, err := s.leaseGroup(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("service")
	for i := range g.Services {
		if g.Services[i].Name == name {
			st, _ := s.deps.Statuses.Status(id)
			httpjson.Write(w, http.StatusOK, serviceStatusOf(&g.Services[i], findService(st, name), s.deps.Deployments.Routes(id)))
			return
		}
	}
	s.writeError(w, r, notFound(fmt.Sprintf("lease %d/%d/%d has no service %q", id.DSeq, id.GSeq, id.OSeq, name)))
}

func findService(st deploy.LeaseStatus, name string) *deploy.ServiceStatus {
	for i := range st.Services {
		if st.Services[i].Name == name {
			return &st.Services[i]
		}
	}
	return nil
}

// leaseManifest answers the lease's group as a one-group manifest. Registry
// passwords are not sent back: the tenant has them, and a leaked token with only
// get-manifest must not reveal them.
func (s *Server) leaseManifest(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
	g, err := s.leaseGroup(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// As the tenant sent it: without the provider's hostnames under its ingress domain.
	g = deploy.WithoutIngressHosts(id, g, s.cfg.IngressDomain)
	out := g
	out.Services = make([]market.Service, len(g.Services))
	for i := range g.Services {
		out.Services[i] = g.Services[i]
		if c := g.Services[i].Credentials; c != nil {
			redacted := *c
			redacted.Password = ""
			out.Services[i].Credentials = &redacted
		}
	}
	httpjson.Write(w, http.StatusOK, market.Manifest{out})
}
