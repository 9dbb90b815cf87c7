package market

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// DecPrecision is the number of decimal places of a Dec, as Cosmos SDK's LegacyDec.
const DecPrecision = 18

// maxDecWholeDigits bounds the integer part of a Dec (LegacyDec holds 316 bits, about
// 95 digits with the 18 decimals), so hostile input cannot make huge numbers.
const maxDecWholeDigits = 95 - DecPrecision

var decScale = new(big.Int).Exp(big.NewInt(10), big.NewInt(DecPrecision), nil)

// Dec is an exact decimal with 18 fractional digits. Its JSON form is the string
// "12.500000000000000000". The zero value is 0.
type Dec struct {
	i *big.Int // value × 10^18
}

// ErrDecSyntax reports a decimal that is not of the form [-]digits[.digits].
var ErrDecSyntax = errors.New("not a decimal number")

// ParseDec reads "123", "0.5", "+2", "-1.25" (at most 18 decimal places).
func ParseDec(s string) (Dec, error) {
	str := s
	neg := false
	if rest, ok := strings.CutPrefix(str, "-"); ok {
		neg, str = true, rest
	} else {
		str = strings.TrimPrefix(str, "+")
	}
	whole, frac, hasDot := strings.Cut(str, ".")
	if whole == "" || hasDot && frac == "" || !digits(whole) || !digits(frac) {
		return Dec{}, fmt.Errorf("%q: %w", s, ErrDecSyntax)
	}
	if len(frac) > DecPrecision {
		return Dec{}, fmt.Errorf("%q: more than %d decimal places", s, DecPrecision)
	}
	if len(whole) > maxDecWholeDigits {
		return Dec{}, fmt.Errorf("%q: more than %d digits before the decimal point", s, maxDecWholeDigits)
	}
	v, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", DecPrecision-len(frac)), 10)
	if !ok {
		return Dec{}, fmt.Errorf("%q: %w", s, ErrDecSyntax)
	}
	if neg {
		v.Neg(v)
	}
	return Dec{i: v}, nil
}

// MustParseDec is ParseDec for constants of code and tests; it panics on a bad one.
func MustParseDec(s string) Dec {
	d, err := ParseDec(s)
	if err != nil {
		panic(err)
	}
	return d
}

// NewDec is the integer n as a Dec.
func NewDec(n int64) Dec {
	return Dec{i: new(big.Int).Mul(big.NewInt(n), decScale)}
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (d Dec) big() *big.Int {
	if d.i == nil {
		return new(big.Int)
	}
	return d.i
}

// Sign returns -1, 0 or 1.
func (d Dec) Sign() int { return d.big().Sign() }

// Cmp compares d and o: -1, 0 or 1.
func (d Dec) Cmp(o Dec) int { return d.big().Cmp(o.big()) }

// MulUint returns d × n.
func (d Dec) MulUint(n uint64) Dec {
	return Dec{i: new(big.Int).Mul(d.big(), new(big.Int).SetUint64(n))}
}

// Mul returns d × o, truncated toward zero to 18 decimals (as LegacyDec's MulTruncate).
func (d Dec) Mul(o Dec) Dec {
	v := new(big.Int).Mul(d.big(), o.big())
	return Dec{i: v.Quo(v, decScale)}
}

// Add returns d + o.
func (d Dec) Add(o Dec) Dec { return Dec{i: new(big.Int).Add(d.big(), o.big())} }

// Sub returns d - o.
func (d Dec) Sub(o Dec) Dec { return Dec{i: new(big.Int).Sub(d.big(), o.big())} }

// DecFromUint is n as a Dec.
func DecFromUint(n uint64) Dec {
	return Dec{i: new(big.Int).Mul(new(big.Int).SetUint64(n), decScale)}
}

// TruncateUint returns the integer part of a non-negative d, and false when d is
// negative or its integer part does not fit in a uint64.
func (d Dec) TruncateUint() (uint64, bool) {
	v := d.big()
	if v.Sign() < 0 {
		return 0, false
	}
	q := new(big.Int).Quo(v, decScale)
	if !q.IsUint64() {
		return 0, false
	}
	return q.Uint64(), true
}

// QuoFloor returns floor(d / o) for positive o and non-negative d, capped at max.
func (d Dec) QuoFloor(o Dec, maxQ uint64) uint64 {
	if o.Sign() <= 0 || d.Sign() <= 0 {
		return 0
	}
	q := new(big.Int).Quo(d.big(), o.big())
	if !q.IsUint64() || q.Uint64() > maxQ {
		return maxQ
	}
	return q.Uint64()
}

// QuoUint returns d / n for n > 0, truncated toward zero to 18 decimals.
func (d Dec) QuoUint(n uint64) Dec {
	return Dec{i: new(big.Int).Quo(d.big(), new(big.Int).SetUint64(n))}
}

// IsZero reports d == 0.
func (d Dec) IsZero() bool { return d.Sign() == 0 }

// String is the canonical form with all 18 decimals.
func (d Dec) String() string {
	v := d.big()
	abs := new(big.Int).Abs(v)
	q, r := new(big.Int).QuoRem(abs, decScale, new(big.Int))
	rs := r.String()
	var b strings.Builder
	if v.Sign() < 0 {
		b.WriteByte('-')
	}
	b.WriteString(q.String())
	b.WriteByte('.')
	b.WriteString(strings.Repeat("0", DecPrecision-len(rs)))
	b.WriteString(rs)
	return b.String()
}

// Short is d without the trailing zeros of its fraction: "0.01", "12", "-1.5".
func (d Dec) Short() string {
	s := d.String()
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// MarshalText writes d's short form (settings files); JSON keeps the canonical form.
func (d Dec) MarshalText() ([]byte, error) { return []byte(d.Short()), nil }

// UnmarshalText reads a decimal as ParseDec does (settings files).
func (d *Dec) UnmarshalText(b []byte) error {
	v, err := ParseDec(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON encodes the canonical string.
func (d Dec) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON reads a quoted decimal.
func (d *Dec) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("decimal must be a JSON string: %w", ErrDecSyntax)
	}
	v, err := ParseDec(s[1 : len(s)-1])
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// DecCoin is an amount of a denomination, e.g. a price per block.
type DecCoin struct {
	Amount Dec    `json:"amount"`
	Denom  string `json:"denom,omitempty"`
}

func (c DecCoin) String() string { return c.Amount.String() + c.Denom }

// Short is the amount without trailing zeros (and without a bare decimal point),
// followed by the denomination: "31.6496uakt", "900uakt". For people; String is the
// canonical form.
func (c DecCoin) Short() string { return c.Amount.Short() + c.Denom }

// Coin is a whole amount of a denomination: balances, deposits, withdrawals.
type Coin struct {
	Amount Uint   `json:"amount"`
	Denom  string `json:"denom"`
}

func (c Coin) String() string { return strconv.FormatUint(uint64(c.Amount), 10) + c.Denom }

// ParseCoin reads "5000000uakt": digits, then a valid denomination.
func ParseCoin(s string) (Coin, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return Coin{}, fmt.Errorf("coin %q: want an amount then a denomination, like 5000000uakt", s)
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return Coin{}, fmt.Errorf("coin %q: amount does not fit in 64 bits", s)
	}
	if !ValidDenom(s[i:]) {
		return Coin{}, fmt.Errorf("coin %q: %q is not a valid denomination", s, s[i:])
	}
	return Coin{Amount: Uint(n), Denom: s[i:]}, nil
}

// ParseDecCoin reads "1.5uakt": a decimal, then a valid denomination.
func ParseDecCoin(s string) (DecCoin, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	d, err := ParseDec(s[:i])
	if err != nil {
		return DecCoin{}, fmt.Errorf("price %q: %w", s, err)
	}
	if !ValidDenom(s[i:]) {
		return DecCoin{}, fmt.Errorf("price %q: %q is not a valid denomination", s, s[i:])
	}
	return DecCoin{Amount: d, Denom: s[i:]}, nil
}

// ValidDenom reports a denomination Cosmos SDK accepts: a letter, then 2 to 127 letters,
// digits or "/:._-".
func ValidDenom(d string) bool {
	if len(d) < 3 || len(d) > 128 {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		letter := c|0x20 >= 'a' && c|0x20 <= 'z'
		digit := c >= '0' && c <= '9'
		switch {
		case letter:
		case i == 0:
			return false
		case !digit && !strings.ContainsRune("/:._-", rune(c)):
			return false
		}
	}
	return true
}
