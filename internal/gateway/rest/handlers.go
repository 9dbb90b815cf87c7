package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	api "berth.dev/berth/api/gateway"
	"berth.dev/berth/internal/cluster/kube"
	"berth.dev/berth/internal/manifest"
	"berth.dev/berth/internal/market"
)

// submitTimeout bounds a manifest submission (ledger queries and the hand-off).
const submitTimeout = 2 * time.Minute

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Version)
}

func (s *Server) address(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Address{Address: s.cfg.Provider})
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeRaw(w, http.StatusOK, s.deps.Status.StatusJSON())
}

// putManifest accepts the deployment's manifest: 200 with an empty body once every
// lease of the deployment with this provider has it (as Akash answers).
func (s *Server) putManifest(w http.ResponseWriter, r *http.Request, id market.LeaseID) {
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
	ctx, cancel := context.WithTimeout(r.Context(), submitTimeout)
	defer cancel()
	if err := s.deps.Manifests.Submit(ctx, id.Owner, id.DSeq, m); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
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
	writeJSON(w, http.StatusOK, leaseStatusOf(&g, st, dep, s.cfg.PublicHostname))
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
			writeJSON(w, http.StatusOK, serviceStatusOf(&g.Services[i], findService(st, name)))
			return
		}
	}
	s.writeError(w, r, notFound(fmt.Sprintf("lease %d/%d/%d has no service %q", id.DSeq, id.GSeq, id.OSeq, name)))
}

func findService(st kube.LeaseStatus, name string) *kube.ServiceStatus {
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
	writeJSON(w, http.StatusOK, market.Manifest{out})
}
