package balance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"berth.dev/berth/api/ledger/v1"
	"berth.dev/berth/api/market/v1"
)

// earningsVersion is the format of the earnings file; another version is refused.
const earningsVersion = 1

// leaseEarning is what the ledger has paid out for one lease, and the lease's state
// when last seen.
type leaseEarning struct {
	withdrawn market.Coin
	state     string
}

// final reports a lease that is closed: its payout will not change.
func final(state string) bool {
	return state == ledger.LeaseClosed || state == ledger.LeaseInsufficientFunds
}

// earnings is the record of what our leases have paid out. It only ever grows: see
// raise. Not safe for concurrent use (the Checker guards it).
type earnings struct {
	provider   string
	leases     map[market.LeaseID]leaseEarning
	totals     map[string]uint64
	lastHeight int64     // of our last withdrawal
	lastTime   time.Time // of our last withdrawal
	lastFull   time.Time // of our last withdrawal of every lease
}

func newEarnings(provider string) *earnings {
	return &earnings{provider: provider, leases: map[market.LeaseID]leaseEarning{}, totals: map[string]uint64{}}
}

// raise records that the ledger has paid out w in total for lease id, which is in
// state: the recorded amount becomes w when w is larger (the ledger's Withdrawn only
// grows, so a lower value is an older reading), and a closed lease stays closed.
// Leases that have paid nothing are not recorded. It reports whether the record
// changed.
func (e *earnings) raise(id market.LeaseID, w market.Coin, state string) (bool, error) {
	old, known := e.leases[id]
	if !known && w.Amount == 0 {
		return false, nil
	}
	next := old
	if !known {
		next.withdrawn.Denom = w.Denom
	}
	if w.Amount > 0 && w.Denom != next.withdrawn.Denom {
		return false, fmt.Errorf("lease %s: paid in %s, but %s was recorded before", id, w.Denom, next.withdrawn.Denom)
	}
	next.withdrawn.Amount = max(next.withdrawn.Amount, w.Amount)
	if state != "" && !final(old.state) {
		next.state = state
	}
	if known && next == old {
		return false, nil
	}
	denom := next.withdrawn.Denom
	add := uint64(next.withdrawn.Amount - old.withdrawn.Amount)
	total := e.totals[denom]
	if total > math.MaxUint64-add {
		return false, fmt.Errorf("lease %s: the total earned in %s overflows", id, denom)
	}
	e.totals[denom] = total + add
	e.leases[id] = next
	return true, nil
}

// totalCoins are the totals sorted by denomination.
func (e *earnings) totalCoins() []market.Coin { return coins(e.totals) }

// earningsFile is the file's JSON form. Amounts are coins as text ("125uakt").
type earningsFile struct {
	Version              int         `json:"version"`
	Provider             string      `json:"provider"`
	LastWithdrawalHeight int64       `json:"last_withdrawal_height,omitempty"`
	LastWithdrawal       time.Time   `json:"last_withdrawal,omitzero"`
	LastFullWithdrawal   time.Time   `json:"last_full_withdrawal,omitzero"`
	Totals               []string    `json:"totals"`
	Leases               []leaseLine `json:"leases"`
}

type leaseLine struct {
	Lease     string `json:"lease"`
	Withdrawn string `json:"withdrawn"`
	State     string `json:"state"`
}

// marshal encodes the record: leases sorted by ID, one per line.
func (e *earnings) marshal() ([]byte, error) {
	f := earningsFile{
		Version: earningsVersion, Provider: e.provider,
		LastWithdrawalHeight: e.lastHeight, LastWithdrawal: e.lastTime, LastFullWithdrawal: e.lastFull,
		Totals: []string{}, Leases: make([]leaseLine, 0, len(e.leases)),
	}
	for _, c := range e.totalCoins() {
		f.Totals = append(f.Totals, c.String())
	}
	for id, l := range e.leases {
		f.Leases = append(f.Leases, leaseLine{Lease: id.String(), Withdrawn: l.withdrawn.String(), State: l.state})
	}
	slices.SortFunc(f.Leases, func(a, b leaseLine) int { return cmp.Compare(a.Lease, b.Lease) })
	return json.MarshalIndent(f, "", "  ")
}

// parseEarnings decodes and checks an earnings file of provider.
func parseEarnings(b []byte, provider string) (*earnings, error) {
	var f earningsFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the record")
	}
	if f.Version != earningsVersion {
		return nil, fmt.Errorf("version %d: this berth reads version %d", f.Version, earningsVersion)
	}
	if f.Provider != provider {
		return nil, fmt.Errorf("it is the record of provider %q, not %q", f.Provider, provider)
	}
	if f.LastWithdrawalHeight < 0 {
		return nil, fmt.Errorf("last_withdrawal_height %d: negative", f.LastWithdrawalHeight)
	}
	e := newEarnings(provider)
	e.lastHeight, e.lastTime, e.lastFull = f.LastWithdrawalHeight, f.LastWithdrawal, f.LastFullWithdrawal
	for i, l := range f.Leases {
		id, err := market.ParseLeaseID(l.Lease)
		if err != nil {
			return nil, fmt.Errorf("leases[%d]: %w", i, err)
		}
		if id.Provider != provider {
			return nil, fmt.Errorf("leases[%d]: lease %s is another provider's", i, l.Lease)
		}
		if _, dup := e.leases[id]; dup {
			return nil, fmt.Errorf("leases[%d]: lease %s is listed twice", i, l.Lease)
		}
		w, err := market.ParseCoin(l.Withdrawn)
		if err != nil {
			return nil, fmt.Errorf("leases[%d].withdrawn: %w", i, err)
		}
		if w.Amount == 0 {
			return nil, fmt.Errorf("leases[%d].withdrawn: %s: leases that paid nothing are not recorded", i, l.Withdrawn)
		}
		if l.State != ledger.LeaseActive && !final(l.State) {
			return nil, fmt.Errorf("leases[%d].state %q: want %s, %s or %s", i, l.State, ledger.LeaseActive, ledger.LeaseClosed, ledger.LeaseInsufficientFunds)
		}
		if _, err := e.raise(id, w, l.State); err != nil {
			return nil, fmt.Errorf("leases[%d]: %w", i, err)
		}
	}
	// The totals are written for people reading the file; they must add up.
	seen := map[string]bool{}
	for i, s := range f.Totals {
		c, err := market.ParseCoin(s)
		if err != nil {
			return nil, fmt.Errorf("totals[%d]: %w", i, err)
		}
		if seen[c.Denom] {
			return nil, fmt.Errorf("totals[%d]: %s is listed twice", i, c.Denom)
		}
		seen[c.Denom] = true
		if got, ok := e.totals[c.Denom]; !ok || uint64(c.Amount) != got {
			return nil, fmt.Errorf("totals[%d]: %s, but the leases add up to %d%s", i, s, e.totals[c.Denom], c.Denom)
		}
	}
	for d := range e.totals {
		if !seen[d] {
			return nil, fmt.Errorf("totals: %s is missing (the leases add up to %d%s)", d, e.totals[d], d)
		}
	}
	return e, nil
}

// loadEarnings reads the record of provider from path; a missing file is an empty
// record.
func loadEarnings(path, provider string) (*earnings, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newEarnings(provider), false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("earnings file %s: %w", path, err)
	}
	e, err := parseEarnings(b, provider)
	if err != nil {
		return nil, false, fmt.Errorf("earnings file %s: %w (fix or move it away; a new record would forget what was earned)", path, err)
	}
	return e, true, nil
}

// writeFileAtomic replaces path with data: written to a temporary file in the same
// directory, synced, renamed over path, and the directory synced.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
