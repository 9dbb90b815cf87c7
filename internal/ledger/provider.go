package ledger

import (
	"slices"
	"strings"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func sortedAttributes(a market.Attributes) market.Attributes {
	out := slices.Clone(a)
	slices.SortStableFunc(out, func(x, y market.Attribute) int { return strings.Compare(x.Key, y.Key) })
	return out
}

func (x *execCtx) createProvider(m *api.MsgCreateProvider) error {
	if _, ok := x.s.get(providerKey(m.Owner)); ok {
		return api.Errorf(api.CodeAlreadyExists, "provider %s is already registered (use provider/update)", m.Owner)
	}
	x.saveProvider(m, api.EventProviderCreated)
	return nil
}

func (x *execCtx) updateProvider(m *api.MsgUpdateProvider) error {
	if _, ok := x.s.get(providerKey(m.Owner)); !ok {
		return api.Errorf(api.CodeNotFound, "provider %s is not registered (use provider/create)", m.Owner)
	}
	x.saveProvider((*api.MsgCreateProvider)(m), api.EventProviderUpdated)
	return nil
}

func (x *execCtx) saveProvider(m *api.MsgCreateProvider, event string) {
	x.s.setJSON(providerKey(m.Owner), api.Provider{Owner: m.Owner, HostURI: m.HostURI, Attributes: sortedAttributes(m.Attributes), Info: m.Info})
	x.ev.emit(event, api.AttrOwner, m.Owner, api.AttrHostURI, m.HostURI)
}

func (x *execCtx) signAttributes(m *api.MsgSignProviderAttributes) error {
	if _, ok := x.s.get(providerKey(m.Owner)); !ok {
		return api.Errorf(api.CodeNotFound, "provider %s is not registered", m.Owner)
	}
	var rec api.AuditedAttributes
	if !getJSON(x.s, auditKey(m.Owner, m.Auditor), &rec) {
		rec = api.AuditedAttributes{Owner: m.Owner, Auditor: m.Auditor}
	}
	for _, a := range m.Attributes {
		i := slices.IndexFunc(rec.Attributes, func(o market.Attribute) bool { return o.Key == a.Key })
		if i >= 0 {
			rec.Attributes[i] = a
		} else {
			rec.Attributes = append(rec.Attributes, a)
		}
	}
	if len(rec.Attributes) > api.MaxAttributes {
		return api.Errorf(api.CodeInvalidMsg, "attributes: the auditor would sign %d attributes for %s, at most %d", len(rec.Attributes), m.Owner, api.MaxAttributes)
	}
	rec.Attributes = sortedAttributes(rec.Attributes)
	x.s.setJSON(auditKey(m.Owner, m.Auditor), rec)
	x.ev.emit(api.EventAuditSigned, api.AttrOwner, m.Owner, api.AttrAuditor, m.Auditor)
	return nil
}

func (x *execCtx) deleteAttributes(m *api.MsgDeleteProviderAttributes) error {
	var rec api.AuditedAttributes
	if !getJSON(x.s, auditKey(m.Owner, m.Auditor), &rec) {
		return api.Errorf(api.CodeNotFound, "auditor %s has signed no attributes of %s", m.Auditor, m.Owner)
	}
	if len(m.Keys) == 0 {
		rec.Attributes = nil
	} else {
		for _, k := range m.Keys {
			i := slices.IndexFunc(rec.Attributes, func(o market.Attribute) bool { return o.Key == k })
			if i < 0 {
				return api.Errorf(api.CodeNotFound, "auditor %s has not signed attribute %q of %s", m.Auditor, k, m.Owner)
			}
			rec.Attributes = slices.Delete(rec.Attributes, i, i+1)
		}
	}
	if len(rec.Attributes) == 0 {
		x.s.del(auditKey(m.Owner, m.Auditor))
	} else {
		x.s.setJSON(auditKey(m.Owner, m.Auditor), rec)
	}
	x.ev.emit(api.EventAuditDeleted, api.AttrOwner, m.Owner, api.AttrAuditor, m.Auditor)
	return nil
}

func (x *execCtx) createCertificate(m *api.MsgCreateCertificate) error {
	c, err := api.ParseCert(m.Cert, m.PubKey, m.Owner)
	if err != nil {
		return err
	}
	serial := c.SerialNumber.String()
	if _, ok := x.s.get(certKey(m.Owner, serial)); ok {
		return api.Errorf(api.CodeAlreadyExists, "certificate %s of %s already exists", serial, m.Owner)
	}
	x.s.setJSON(certKey(m.Owner, serial), api.Certificate{Owner: m.Owner, Serial: serial, State: api.CertValid, Cert: m.Cert, PubKey: m.PubKey})
	x.ev.emit(api.EventCertCreated, api.AttrOwner, m.Owner, api.AttrSerial, serial)
	return nil
}

func (x *execCtx) revokeCertificate(m *api.MsgRevokeCertificate) error {
	var c api.Certificate
	if !getJSON(x.s, certKey(m.Owner, m.Serial), &c) {
		return api.Errorf(api.CodeNotFound, "certificate %s of %s does not exist", m.Serial, m.Owner)
	}
	if c.State != api.CertValid {
		return api.Errorf(api.CodeInvalidState, "certificate %s of %s is already %s", m.Serial, m.Owner, c.State)
	}
	c.State = api.CertRevoked
	x.s.setJSON(certKey(m.Owner, m.Serial), c)
	x.ev.emit(api.EventCertRevoked, api.AttrOwner, m.Owner, api.AttrSerial, m.Serial)
	return nil
}

// meetsRequirements reports why a provider cannot serve a group, or nil: every
// required attribute among its own (a required key may be a glob pattern), and the
// required auditors' signatures on them.
func meetsRequirements(r reader, prov api.Provider, req market.PlacementRequirements) error {
	for _, a := range req.Attributes {
		if !prov.Attributes.Satisfies(a) {
			return api.Errorf(api.CodeRequirements, "provider %s lacks attribute %s=%s", prov.Owner, a.Key, a.Value)
		}
	}
	signed := func(auditor string) bool {
		var rec api.AuditedAttributes
		if !getJSON(r, auditKey(prov.Owner, auditor), &rec) {
			return false
		}
		for _, a := range req.Attributes {
			if !rec.Attributes.Satisfies(a) {
				return false
			}
		}
		return true
	}
	for _, au := range req.SignedBy.AllOf {
		if !signed(au) {
			return api.Errorf(api.CodeRequirements, "auditor %s has not signed the required attributes of provider %s", au, prov.Owner)
		}
	}
	if len(req.SignedBy.AnyOf) > 0 && !slices.ContainsFunc(req.SignedBy.AnyOf, signed) {
		return api.Errorf(api.CodeRequirements, "none of the auditors %v has signed the required attributes of provider %s", req.SignedBy.AnyOf, prov.Owner)
	}
	return nil
}
