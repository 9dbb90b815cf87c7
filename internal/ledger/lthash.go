package ledger

import (
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
)

// ltLanes is the number of 16-bit lanes of the state hash (LtHash16 of Bellare and
// Micciancio's additive construction, with the parameters Facebook's LtHash uses:
// 1024 lanes, 2048 bytes).
const ltLanes = 1024

// ltHash is a homomorphic set hash of the state: the lane-wise sum (mod 2^16) of an
// extendable-output hash of every (key, value) pair. Adding or removing a pair costs one
// hash, so a block's app hash covers the whole state in O(changes), and two states with
// the same pairs have the same hash whatever history led to them.
type ltHash [ltLanes]uint16

// add folds the pair in (sign +1) or out (sign -1).
func (h *ltHash) add(key, value []byte, sign int) {
	var buf [2 * ltLanes]byte
	x := sha3.NewSHAKE128()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	_, _ = x.Write(n[:])
	_, _ = x.Write(key)
	_, _ = x.Write(value)
	_, _ = x.Read(buf[:])
	for i := range h {
		v := binary.LittleEndian.Uint16(buf[2*i:])
		if sign > 0 {
			h[i] += v
		} else {
			h[i] -= v
		}
	}
}

// sum is the 32-byte digest of the lanes: the app hash.
func (h *ltHash) sum() []byte {
	b := h.bytes()
	s := sha256.Sum256(b)
	return s[:]
}

func (h *ltHash) bytes() []byte {
	b := make([]byte, 2*ltLanes)
	for i, v := range h {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return b
}

func (h *ltHash) setBytes(b []byte) bool {
	if len(b) != 2*ltLanes {
		return false
	}
	for i := range h {
		h[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return true
}
