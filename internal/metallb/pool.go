// Package metallb reads MetalLB's address pools: their ranges, their size, and
// whether an address is in them (for the IP operator's usage and the provider's
// leased-IP capacity).
package metallb

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PoolResource is MetalLB's IPAddressPool (metallb.io/v1beta1).
var PoolResource = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

// Range is a contiguous block of addresses of a MetalLB IPAddressPool: one of its
// spec.addresses entries, a CIDR ("192.0.2.0/28") or a range ("192.0.2.10-192.0.2.20").
type Range struct {
	First, Last netip.Addr
}

// ParseRange reads one spec.addresses entry.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if from, to, ok := strings.Cut(s, "-"); ok {
		a, err1 := netip.ParseAddr(strings.TrimSpace(from))
		b, err2 := netip.ParseAddr(strings.TrimSpace(to))
		switch {
		case err1 != nil || err2 != nil:
			return Range{}, fmt.Errorf("address range %q: want FIRST-LAST addresses", s)
		case a.Is4() != b.Is4():
			return Range{}, fmt.Errorf("address range %q mixes IPv4 and IPv6", s)
		case b.Less(a):
			return Range{}, fmt.Errorf("address range %q ends before it starts", s)
		}
		return Range{First: a.Unmap(), Last: b.Unmap()}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Range{}, fmt.Errorf("address range %q: want a CIDR or FIRST-LAST", s)
	}
	p = p.Masked()
	return Range{First: p.Addr(), Last: lastOf(p)}, nil
}

// lastOf is the last address of a prefix.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 7; j >= 0; j-- {
			if i*8+(7-j) >= bits {
				b[i] |= 1 << j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Contains reports whether a is in the range.
func (r Range) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return a.Is4() == r.First.Is4() && !a.Less(r.First) && !r.Last.Less(a)
}

// buggy reports an IPv4 address ending in .0 or .255, which MetalLB's avoidBuggyIPs
// leaves out (some old networking equipment drops traffic to them).
func buggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	last := a.As4()[3]
	return last == 0 || last == 255
}

// Size is how many addresses the range offers (without the .0 and .255 ones when
// avoidBuggy).
func (r Range) Size(avoidBuggy bool) *big.Int {
	n := new(big.Int).Sub(new(big.Int).SetBytes(r.Last.AsSlice()), new(big.Int).SetBytes(r.First.AsSlice()))
	n.Add(n, big.NewInt(1))
	if !avoidBuggy || !r.First.Is4() {
		return n
	}
	// IPv4: count the .0 and .255 addresses inside.
	first, last := addr4(r.First), addr4(r.Last)
	var skip int64
	for _, end := range []uint32{0, 255} {
		// Addresses x with x&0xff == end in [first, last].
		lo := first &^ 0xff
		for x := lo | end; x <= last; x += 256 {
			if x >= first {
				skip++
			}
			if x > ^uint32(0)-256 {
				break
			}
		}
	}
	return n.Sub(n, big.NewInt(skip))
}

func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Pool is a MetalLB IPAddressPool as the operator counts it.
type Pool struct {
	Name       string
	Ranges     []Range
	AvoidBuggy bool
	// AutoAssign: MetalLB assigns from the pool without the address-pool annotation.
	AutoAssign bool
}

// ParsePool reads an IPAddressPool's spec.
func ParsePool(name string, addresses []string, avoidBuggy, autoAssign bool) (Pool, error) {
	p := Pool{Name: name, AvoidBuggy: avoidBuggy, AutoAssign: autoAssign}
	if len(addresses) == 0 {
		return p, errors.New("no addresses")
	}
	for _, a := range addresses {
		r, err := ParseRange(a)
		if err != nil {
			return p, err
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p, nil
}

// maxCount is where counts stop: an IPv6 /64 is "more than anyone leases".
var maxCount = big.NewInt(1 << 40)

// Size is how many addresses the pool offers, at most 2⁴⁰ (an IPv6 prefix counts as
// that many).
func (p Pool) Size() int64 {
	n := new(big.Int)
	for _, r := range p.Ranges {
		n.Add(n, r.Size(p.AvoidBuggy))
	}
	if n.Cmp(maxCount) > 0 {
		return maxCount.Int64()
	}
	return n.Int64()
}

// Contains reports whether the pool offers a.
func (p Pool) Contains(a netip.Addr) bool {
	if p.AvoidBuggy && buggy(a.Unmap()) {
		return false
	}
	for _, r := range p.Ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}
