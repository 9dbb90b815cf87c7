package ledger

import (
	"math"
	"strconv"

	api "berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// execCtx is the state a message executes against: the working store, the params, the
// block height and the events being emitted.
type execCtx struct {
	s      *store
	p      *api.Params
	height int64
	ev     *events
}

func (x *execCtx) account(addr string) (api.Account, bool) {
	var a api.Account
	ok := getJSON(x.s, accountKey(addr), &a)
	return a, ok
}

// ensureAccount creates the account record of an address that receives funds.
func (x *execCtx) ensureAccount(addr string) {
	if _, ok := x.s.get(accountKey(addr)); !ok {
		x.s.setJSON(accountKey(addr), api.Account{Address: addr})
	}
}

func readBalance(r reader, addr, denom string) uint64 {
	var c market.Coin
	if !getJSON(r, balanceKey(addr, denom), &c) {
		return 0
	}
	return uint64(c.Amount)
}

func (x *execCtx) setBalance(addr, denom string, amount uint64) {
	if amount == 0 {
		x.s.del(balanceKey(addr, denom))
		return
	}
	x.s.setJSON(balanceKey(addr, denom), market.Coin{Amount: market.Uint(amount), Denom: denom})
}

// debit takes c from addr's balance.
func (x *execCtx) debit(addr string, c market.Coin, what string) error {
	have := readBalance(x.s, addr, c.Denom)
	if have < uint64(c.Amount) {
		return api.Errorf(api.CodeInsufficientFunds, "%s: %s has %d%s, needs %s", what, addr, have, c.Denom, c)
	}
	x.setBalance(addr, c.Denom, have-uint64(c.Amount))
	return nil
}

// credit adds c to addr's balance. Total supply fits in a uint64 (checked at genesis),
// so a balance cannot overflow unless state is corrupt.
func (x *execCtx) credit(addr string, c market.Coin) error {
	if c.Amount == 0 {
		return nil
	}
	have := readBalance(x.s, addr, c.Denom)
	if have > math.MaxUint64-uint64(c.Amount) {
		return api.Errorf(api.CodeInternal, "balance of %s in %s overflows", addr, c.Denom)
	}
	x.ensureAccount(addr)
	x.setBalance(addr, c.Denom, have+uint64(c.Amount))
	return nil
}

func (x *execCtx) send(m *api.MsgSend) error {
	for _, c := range m.Amount {
		if err := x.debit(m.From, c, "send"); err != nil {
			return err
		}
		if err := x.credit(m.To, c); err != nil {
			return err
		}
		x.ev.emit(api.EventTransfer, api.AttrFrom, m.From, api.AttrTo, m.To, api.AttrAmount, c.String())
	}
	return nil
}

func uintStr(v uint64) string { return strconv.FormatUint(v, 10) }
