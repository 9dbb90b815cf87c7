package app

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/chain"
)

// ledgerReader answers the manifest service's and the authenticator's questions
// with ledger queries.
type ledgerReader struct {
	c *chain.Client
}

// Deployment implements manifest.Ledger.
func (l ledgerReader) Deployment(ctx context.Context, id market.DeploymentID) (ledger.DeploymentResponse, error) {
	var d ledger.DeploymentResponse
	err := ledger.QueryDeployment.Into(ctx, l.c, ledger.DeploymentRequest{ID: id}, &d)
	return d, err
}

// ActiveLeases implements manifest.Ledger.
func (l ledgerReader) ActiveLeases(ctx context.Context, id market.DeploymentID, provider string) ([]market.LeaseID, error) {
	var out []market.LeaseID
	req := ledger.LeasesRequest{Owner: id.Owner, DSeq: id.DSeq, Provider: provider, State: ledger.LeaseActive}
	err := ledger.List(ctx, l.c, ledger.QueryLeases, req, func(r ledger.LeasesResponse) error {
		for i := range r.Leases {
			out = append(out, r.Leases[i].Lease.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("leases of %s: %w", id, err)
	}
	return out, nil
}

// BlockTime implements manifest.Ledger.
func (l ledgerReader) BlockTime(ctx context.Context, height int64) (time.Time, error) {
	return l.c.BlockTime(ctx, height)
}

// Certificate implements auth.Ledger.
func (l ledgerReader) Certificate(ctx context.Context, owner, serial string) (ledger.Certificate, error) {
	var resp ledger.CertificatesResponse
	if err := ledger.QueryCertificates.Into(ctx, l.c, ledger.CertificatesRequest{Owner: owner, Serial: serial}, &resp); err != nil {
		return ledger.Certificate{}, err
	}
	for _, c := range resp.Certificates {
		if c.Serial == serial {
			return c, nil
		}
	}
	return ledger.Certificate{}, fmt.Errorf("certificate %s of %s: %w", serial, owner, ledger.ErrNotFound)
}

// Account implements auth.Ledger.
func (l ledgerReader) Account(ctx context.Context, addr string) (ledger.Account, error) {
	var resp ledger.AccountResponse
	if err := ledger.QueryAccount.Into(ctx, l.c, ledger.AccountRequest{Address: addr}, &resp); err != nil {
		return ledger.Account{}, err
	}
	return resp.Account, nil
}
