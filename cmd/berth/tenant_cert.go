package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/internal/gateway/auth"
)

// readPEMFile reads a certificate file given to --from-pem (bounded: a certificate and
// its key are about a kilobyte).
func readPEMFile(name string) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--from-pem: %w", err)
	}
	defer func() { _ = fh.Close() }()
	data, err := io.ReadAll(io.LimitReader(fh, auth.MaxPEMFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--from-pem %s: %w", name, err)
	}
	if len(data) > auth.MaxPEMFileBytes {
		return nil, fmt.Errorf("--from-pem %s: over %d bytes: not a certificate file", name, auth.MaxPEMFileBytes)
	}
	return data, nil
}

// certFromPEM registers the client certificate in a PEM file made elsewhere and keeps
// it, with its key, in dir as `cert create` keeps its own. Everything is checked before
// anything is sent, and nothing is written unless the ledger has the certificate: a
// refusal leaves the home as it was. Running it again after a lost answer or a failed
// save is safe: a certificate the ledger already has (the same one, valid) is kept
// without registering it again.
func certFromPEM(ctx context.Context, s *session, dir, file string, data []byte, force bool) error {
	params := s.c.Params()
	in, err := auth.ParseClientPEM(data, auth.AkashKeyPasswords(s.priv, params.AddressPrefix))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := auth.CheckClientCertificate(in.X509, s.key.Address, time.Now()); err != nil {
		return fmt.Errorf("%s: certificate: %w", file, err)
	}
	msg := &ledger.MsgCreateCertificate{Owner: s.key.Address, Cert: in.Cert, PubKey: in.PubKey}
	if err := msg.ValidateBasic(&params); err != nil {
		return fmt.Errorf("%s: the ledger would refuse the certificate: %w", file, err)
	}
	serial := in.X509.SerialNumber.String()
	registered, err := alreadyRegistered(ctx, s, serial, in.X509.Raw)
	if err != nil {
		return err
	}
	if in.Key != nil && !force {
		if err := keptElse(dir, in.X509.Raw); err != nil {
			return err
		}
	}
	var height int64
	if !registered {
		res, err := s.br.Broadcast(ctx, msg)
		if err != nil {
			return fmt.Errorf("register certificate %s: %w (nothing was kept)", serial, err)
		}
		height = res.Height
	}
	kept := ""
	if in.Key != nil {
		if err := in.Save(dir); err != nil {
			return fmt.Errorf("certificate %s is registered but could not be kept (run the command again to keep it): %w", serial, err)
		}
		kept = dir
	}
	if s.json {
		return writeJSON(s.out, map[string]any{"serial": serial, "height": height, "already_registered": registered, "dir": kept})
	}
	what := fmt.Sprintf("certificate %s registered in block %d", serial, height)
	if registered {
		what = fmt.Sprintf("certificate %s was already registered", serial)
	}
	if kept == "" {
		return writeString(s.out, fmt.Sprintf("%s; %s has no private key, so nothing is kept in the home (the tenant commands use a kept certificate, or a token)\n", what, file))
	}
	return writeString(s.out, fmt.Sprintf("%s, saved in %s\n", what, kept))
}

// alreadyRegistered reports whether the ledger has this very certificate for the
// session's key, valid; a revoked one, or another under the serial, is an error.
func alreadyRegistered(ctx context.Context, s *session, serial string, raw []byte) (bool, error) {
	var resp ledger.CertificatesResponse
	if err := ledger.QueryCertificates.Into(ctx, s.c, ledger.CertificatesRequest{Owner: s.key.Address, Serial: serial}, &resp); err != nil {
		return false, fmt.Errorf("certificate %s on the ledger: %w", serial, err)
	}
	for _, c := range resp.Certificates {
		if c.Serial != serial {
			continue
		}
		b, _ := pem.Decode(c.Cert)
		switch {
		case b == nil || !bytes.Equal(b.Bytes, raw):
			return false, fmt.Errorf("the ledger has another certificate of %s with serial %s: certificates need distinct serials", s.key.Address, serial)
		case c.State != ledger.CertValid:
			return false, fmt.Errorf("certificate %s is %s on the ledger: a revoked certificate cannot be registered again (make a new one)", serial, c.State)
		}
		return true, nil
	}
	return false, nil
}

// keptElse refuses to replace a certificate kept in dir by another one (--force does).
func keptElse(dir string, raw []byte) error {
	kept, err := os.ReadFile(filepath.Join(dir, auth.CertFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("the certificate kept in %s: %w", dir, err)
	}
	if b, _ := pem.Decode(kept); b != nil && bytes.Equal(b.Bytes, raw) {
		return nil // the same certificate: keeping it again changes nothing
	}
	return usageError("%s already holds another certificate: revoke it with `berth tenant cert revoke SERIAL`, or pass --force to replace it", dir)
}
