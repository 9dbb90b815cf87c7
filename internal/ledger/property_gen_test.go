package ledger

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

func (r *propRun) coin(n uint64) market.Coin {
	return market.Coin{Amount: market.Uint(n), Denom: api.DefaultDenom}
}

func (r *propRun) providerMsg(name string, attrs market.Attributes) *api.MsgCreateProvider {
	return &api.MsgCreateProvider{Owner: r.h.addr(name), HostURI: "https://" + name + ".example.com:8443", Attributes: attrs}
}

func (r *propRun) otherTenant(than string) string {
	for {
		if n := pick(r.rng, r.tenants); n != than {
			return n
		}
	}
}

type txGen struct {
	weight int
	gen    func(s *propSnap) *plannedTx
}

func (r *propRun) randomTx() *plannedTx {
	v := r.snap
	gens := []txGen{
		{8, r.genCreateDeployment},
		{5, r.genDeposit},
		{30, r.genBid},
		{24, r.genLease},
		{3, r.genCloseLease},
		{3, r.genCloseBid},
		{3, r.genGroup},
		{5, r.genWithdraw},
		{2, r.genCloseDeployment},
		{4, r.genSend},
		{2, r.genUpdateDeployment},
		{2, r.genProvider},
		{2, r.genAudit},
		{3, r.genBundle},
		{2, r.genReplay},
	}
	total := 0
	for _, g := range gens {
		total += g.weight
	}
	n := r.rng.IntN(total)
	for _, g := range gens {
		if n < g.weight {
			return g.gen(v)
		}
		n -= g.weight
	}
	return nil
}

func (r *propRun) randomPrice() market.Dec {
	var s string
	if r.chance(30) {
		s = fmt.Sprintf("%d.%03d", r.rng.IntN(60), r.rng.IntN(1000))
	} else {
		s = strconv.Itoa(1 + r.rng.IntN(400))
	}
	d, err := market.ParseDec(s)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *propRun) randomGroups() ([]market.GroupSpec, []byte) {
	if r.chance(20) {
		return r.web.Groups, r.web.Version
	}
	n := 1 + r.rng.IntN(3)
	groups := make([]market.GroupSpec, n)
	for i := range groups {
		g := market.GroupSpec{Name: fmt.Sprintf("g%d", i)}
		switch r.rng.IntN(5) {
		case 0, 1:
			g.Requirements.Attributes = market.Attributes{usWest}
		case 2:
			g.Requirements.Attributes = market.Attributes{usWest}
			g.Requirements.SignedBy.AnyOf = []string{r.h.addr(r.auditor)}
		case 3:
			g.Requirements.Attributes = market.Attributes{{Key: "region", Value: "eu-central"}}
		}
		for u := range 1 + r.rng.IntN(2) {
			g.Resources = append(g.Resources, market.ResourceUnit{
				Count: uint32(1 + r.rng.IntN(3)),
				Price: market.DecCoin{Amount: r.randomPrice(), Denom: api.DefaultDenom},
				Resources: market.Resources{
					ID:        uint32(u + 1),
					CPU:       &market.CPU{Units: market.ResourceValue{Val: market.Uint(100 * (1 + r.rng.IntN(10)))}},
					Memory:    &market.Memory{Size: market.ResourceValue{Val: 512 << 20}},
					Endpoints: market.Endpoints{},
				},
			})
		}
		groups[i] = g
	}
	version := sha256.Sum256([]byte(fmt.Sprint(r.rng.Uint64())))
	return groups, version[:]
}

func (r *propRun) genCreateDeployment(*propSnap) *plannedTx {
	owner := pick(r.rng, r.tenants)
	if r.chance(10) {
		owner = "p0" // a provider deploys too, and may lease from itself
	}
	groups, version := r.randomGroups()
	m := &api.MsgCreateDeployment{
		ID:      market.DeploymentID{Owner: r.h.addr(owner), DSeq: uint64(1 + r.rng.IntN(12))},
		Groups:  groups,
		Version: version,
		Deposit: r.coin(uint64(1000 + r.rng.IntN(5000))),
	}
	p := &plannedTx{signer: owner, msgs: []api.Msg{m}}
	switch {
	case r.chance(4):
		m.Deposit = r.coin(999) // below deployment_min_deposit
		p.pre = api.CodeInvalidMsg
	case r.chance(3):
		m.Deposit = r.coin(1_000_000) // more than the tenant has
	}
	return p
}

func (r *propRun) genDeposit(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d api.Deployment) bool { return d.State == api.DeploymentActive })
	if !ok {
		return nil
	}
	depositor := r.nameOf[d.ID.Owner]
	if r.chance(25) {
		depositor = r.otherTenant(depositor)
	}
	m := &api.MsgDepositDeployment{ID: d.ID, Depositor: r.h.addr(depositor), Amount: r.coin(uint64(1 + r.rng.IntN(5000)))}
	p := &plannedTx{signer: depositor, msgs: []api.Msg{m}}
	if r.chance(4) {
		m.Amount.Amount = 0
		p.pre = api.CodeInvalidMsg
	}
	return p
}

func (r *propRun) genBid(v *propSnap) *plannedTx {
	lo, ok := pickMostly(r, v.orders, 85, func(o propOrder) bool { return o.State == api.OrderOpen })
	if !ok {
		return nil
	}
	if r.chance(40) {
		// An open order that has bids already, so that orders fill up.
		if o, ok := pickMostly(r, v.orders, 100, func(o propOrder) bool {
			return o.State == api.OrderOpen && slices.ContainsFunc(v.bids, func(b api.Bid) bool { return b.ID.Order() == o.ID })
		}); ok {
			lo = o
		}
	}
	var o api.Order
	getJSON(v.v, orderKey(lo.ID), &o)
	// Mostly a provider that has not bid on the order yet, so orders fill up.
	bidder := pick(r.rng, r.providers)
	if r.chance(80) {
		var fresh []string
		for _, p := range r.providers {
			if !slices.ContainsFunc(v.bids, func(b api.Bid) bool { return b.ID == o.ID.Bid(r.h.addr(p)) }) {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) > 0 {
			bidder = pick(r.rng, fresh)
		}
	}
	if r.chance(4) {
		bidder = r.outsider // not a provider
	}
	limit := groupPrice(o.Spec)
	price := limit.Amount
	switch n := r.rng.IntN(10); {
	case n < 2:
		price = price.Add(dec(r.t, "0.001")) // too high
	case n < 3:
		// exactly the limit
	default:
		f, err := strconv.ParseFloat(price.String(), 64)
		if err != nil {
			r.t.Fatal(err)
		}
		price = dec(r.t, strconv.FormatFloat(f*(0.3+0.7*r.rng.Float64()), 'f', 3, 64))
	}
	if price.Sign() <= 0 {
		price = dec(r.t, "0.001")
	}
	m := &api.MsgCreateBid{
		OrderID:  o.ID,
		Provider: r.h.addr(bidder),
		Price:    market.DecCoin{Amount: price, Denom: api.DefaultDenom},
		Deposit:  r.params.BidMinDeposit,
	}
	if r.chance(20) {
		m.Deposit.Amount += market.Uint(r.rng.IntN(1000))
	}
	if r.chance(15) {
		for _, ru := range o.Spec.Resources {
			m.ResourcesOffer = append(m.ResourcesOffer, api.ResourceOffer{Resources: ru.Resources, Count: ru.Count})
		}
		if r.chance(30) {
			m.ResourcesOffer[0].Count++ // does not match the group: invalid at execution
		}
	}
	p := &plannedTx{signer: bidder, msgs: []api.Msg{m}}
	if r.chance(3) {
		m.Price.Amount = market.Dec{}
		p.pre = api.CodeInvalidMsg
	}
	return p
}

func (r *propRun) genLease(v *propSnap) *plannedTx {
	b, ok := pickMostly(r, v.bids, 85, func(b api.Bid) bool { return b.State == api.BidOpen })
	if !ok {
		return nil
	}
	if r.chance(50) {
		// Mostly another lease of a deployment that has one, so that accounts paying
		// several leases run out.
		if b2, ok := pickMostly(r, v.bids, 100, func(b api.Bid) bool {
			return b.State == api.BidOpen && slices.ContainsFunc(v.leases, func(l api.Lease) bool {
				return l.State == api.LeaseActive && l.ID.Deployment() == b.ID.Order().Group().Deployment()
			})
		}); ok {
			b = b2
		}
	}
	owner := r.nameOf[b.ID.Owner]
	m := &api.MsgCreateLease{BidID: b.ID}
	if r.chance(5) {
		// Signed by someone who is not the message's signer.
		return &plannedTx{signer: r.otherTenant(owner), msgs: []api.Msg{m}, pre: api.CodeUnauthorized}
	}
	return &plannedTx{signer: owner, msgs: []api.Msg{m}}
}

var providerReasonList = []string{api.ReasonUnstable, api.ReasonDecommission, api.ReasonUnspecified, api.ReasonManifestTimeout}

func (r *propRun) genCloseLease(v *propSnap) *plannedTx {
	l, ok := pickMostly(r, v.leases, 85, func(l api.Lease) bool { return l.State == api.LeaseActive })
	if !ok {
		return nil
	}
	owner, prov := r.nameOf[l.ID.Owner], r.nameOf[l.ID.Provider]
	switch n := r.rng.IntN(100); {
	case n < 5:
		stranger := r.outsider
		return &plannedTx{signer: stranger, msgs: []api.Msg{&api.MsgCloseLease{ID: l.ID, Sender: r.h.addr(stranger), Reason: api.ReasonUnstable}}, pre: api.CodeNotPermitted}
	case n < 8:
		return &plannedTx{signer: owner, msgs: []api.Msg{&api.MsgCloseLease{ID: l.ID, Sender: l.ID.Owner, Reason: api.ReasonUnstable}}, pre: api.CodeInvalidMsg}
	case n < 50 && l.ID.Owner != l.ID.Provider:
		return &plannedTx{signer: prov, msgs: []api.Msg{&api.MsgCloseLease{ID: l.ID, Sender: l.ID.Provider, Reason: pick(r.rng, providerReasonList)}}}
	default:
		return &plannedTx{signer: owner, msgs: []api.Msg{&api.MsgCloseLease{ID: l.ID, Sender: l.ID.Owner, Reason: api.ReasonOwner}}}
	}
}

func (r *propRun) genCloseBid(v *propSnap) *plannedTx {
	b, ok := pickMostly(r, v.bids, 80, func(b api.Bid) bool { return b.State == api.BidOpen || b.State == api.BidActive })
	if !ok {
		return nil
	}
	m := &api.MsgCloseBid{ID: b.ID}
	if r.chance(50) {
		m.Reason = pick(r.rng, providerReasonList)
	}
	p := &plannedTx{signer: r.nameOf[b.ID.Provider], msgs: []api.Msg{m}}
	if r.chance(4) {
		m.Reason = api.ReasonOwner // not a provider's reason
		p.pre = api.CodeInvalidMsg
	}
	return p
}

func (r *propRun) genGroup(v *propSnap) *plannedTx {
	n := r.rng.IntN(10)
	g, ok := pickMostly(r, v.groups, 85, func(g propGroup) bool {
		switch {
		case n < 3:
			return g.State == api.GroupOpen
		case n < 8:
			return g.State == api.GroupPaused || g.State == api.GroupInsufficientFunds
		}
		return g.State != api.GroupClosed
	})
	if !ok {
		return nil
	}
	var m api.Msg
	switch {
	case n < 3:
		m = &api.MsgPauseGroup{ID: g.ID}
	case n < 8:
		m = &api.MsgStartGroup{ID: g.ID}
	default:
		m = &api.MsgCloseGroup{ID: g.ID}
	}
	return &plannedTx{signer: r.nameOf[g.ID.Owner], msgs: []api.Msg{m}}
}

func (r *propRun) genWithdraw(v *propSnap) *plannedTx {
	l, ok := pickMostly(r, v.leases, 85, func(l api.Lease) bool { return l.State == api.LeaseActive })
	if !ok {
		return nil
	}
	return &plannedTx{signer: r.nameOf[l.ID.Provider], msgs: []api.Msg{&api.MsgWithdrawLease{ID: l.ID}}}
}

func (r *propRun) genCloseDeployment(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d api.Deployment) bool { return d.State == api.DeploymentActive })
	if !ok {
		return nil
	}
	return &plannedTx{signer: r.nameOf[d.ID.Owner], msgs: []api.Msg{&api.MsgCloseDeployment{ID: d.ID}}}
}

func (r *propRun) genUpdateDeployment(v *propSnap) *plannedTx {
	d, ok := pickMostly(r, v.deps, 85, func(d api.Deployment) bool { return d.State == api.DeploymentActive })
	if !ok {
		return nil
	}
	version := sha256.Sum256([]byte(fmt.Sprint(r.rng.Uint64())))
	return &plannedTx{signer: r.nameOf[d.ID.Owner], msgs: []api.Msg{&api.MsgUpdateDeployment{ID: d.ID, Version: version[:]}}}
}

func (r *propRun) genSend(*propSnap) *plannedTx {
	all := slices.Concat(r.tenants, r.providers, []string{r.outsider})
	from := pick(r.rng, all)
	to := r.h.addr(pick(r.rng, all))
	if r.chance(15) {
		if len(r.strangers) == 0 || r.chance(50) {
			b := make([]byte, api.AddressLen)
			for i := range b {
				b[i] = byte(r.rng.Uint32())
			}
			a, err := api.AddressFromBytes(r.params.AddressPrefix, b)
			if err != nil {
				r.t.Fatal(err)
			}
			r.strangers = append(r.strangers, a)
		}
		to = pick(r.rng, r.strangers)
	}
	m := &api.MsgSend{From: r.h.addr(from), To: to, Amount: []market.Coin{r.coin(uint64(1 + r.rng.IntN(40_000)))}}
	p := &plannedTx{signer: from, msgs: []api.Msg{m}}
	if r.chance(4) {
		m.Amount[0].Amount = 0
		p.pre = api.CodeInvalidMsg
	}
	return p
}

func (r *propRun) genProvider(*propSnap) *plannedTx {
	name := pick(r.rng, r.providers)
	attrs := market.Attributes{usWest}
	if r.chance(30) {
		attrs = market.Attributes{{Key: "region", Value: "eu-central"}}
	}
	m := r.providerMsg(name, attrs)
	if r.chance(50) {
		return &plannedTx{signer: name, msgs: []api.Msg{(*api.MsgUpdateProvider)(m)}}
	}
	return &plannedTx{signer: name, msgs: []api.Msg{m}}
}

func (r *propRun) genAudit(*propSnap) *plannedTx {
	owner := r.h.addr(pick(r.rng, r.providers))
	au := r.h.addr(r.auditor)
	if r.chance(60) {
		return &plannedTx{signer: r.auditor, msgs: []api.Msg{&api.MsgSignProviderAttributes{Auditor: au, Owner: owner, Attributes: market.Attributes{usWest}}}}
	}
	return &plannedTx{signer: r.auditor, msgs: []api.Msg{&api.MsgDeleteProviderAttributes{Auditor: au, Owner: owner}}}
}

// genBundle makes a transaction of several messages, some of which fail late, so that
// the writes of the ones before must be undone.
func (r *propRun) genBundle(v *propSnap) *plannedTx {
	switch r.rng.IntN(4) {
	case 0: // bid, then withdraw its deposit, or fail on a lease that does not exist
		p := r.genBid(v)
		if p == nil || p.pre != 0 || p.signer == r.outsider {
			return p
		}
		bid, ok := p.msgs[0].(*api.MsgCreateBid)
		if !ok {
			r.t.Fatalf("genBid made a %T", p.msgs[0])
		}
		if r.chance(50) {
			p.msgs = append(p.msgs, &api.MsgCloseBid{ID: bid.OrderID.Bid(bid.Provider)})
		} else {
			p.msgs = append(p.msgs, &api.MsgWithdrawLease{ID: market.LeaseID(bid.OrderID.Bid(bid.Provider))})
		}
		return p
	case 1: // deposit, then start a group
		g, ok := pickMostly(r, v.groups, 80, func(g propGroup) bool {
			return g.State == api.GroupInsufficientFunds || g.State == api.GroupPaused
		})
		if !ok {
			return nil
		}
		owner := r.nameOf[g.ID.Owner]
		return &plannedTx{signer: owner, msgs: []api.Msg{
			&api.MsgDepositDeployment{ID: g.ID.Deployment(), Depositor: g.ID.Owner, Amount: r.coin(uint64(1 + r.rng.IntN(20_000)))},
			&api.MsgStartGroup{ID: g.ID},
		}}
	case 2: // accept two bids at once, often of the same order: the second fails
		b1, ok := pickMostly(r, v.bids, 100, func(b api.Bid) bool { return b.State == api.BidOpen })
		if !ok {
			return nil
		}
		b2, _ := pickMostly(r, v.bids, 100, func(b api.Bid) bool { return b.State == api.BidOpen && b.ID.Owner == b1.ID.Owner })
		return &plannedTx{signer: r.nameOf[b1.ID.Owner], msgs: []api.Msg{&api.MsgCreateLease{BidID: b1.ID}, &api.MsgCreateLease{BidID: b2.ID}}}
	default: // create a deployment, then send more than is left
		p := r.genCreateDeployment(v)
		if p.pre != 0 {
			return p
		}
		from := p.signer
		p.msgs = append(p.msgs, &api.MsgSend{From: r.h.addr(from), To: r.h.addr(r.outsider), Amount: []market.Coin{r.coin(uint64(1 + r.rng.IntN(300_000)))}})
		return p
	}
}

// genReplay sends again a transaction that was executed before.
func (r *propRun) genReplay(*propSnap) *plannedTx {
	if len(r.consumed) == 0 {
		return nil
	}
	st := pick(r.rng, r.consumed)
	return &plannedTx{signer: st.signer, raw: st.raw}
}
