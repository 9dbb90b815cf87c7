package sdl

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"berth.dev/berth/internal/yaml"
)

// Quantities, read exactly as Akash reads them: from the scalar's text (so quoting does
// not matter), as a float that is then truncated ("1.005" CPU is 1004 millicores), with
// case-sensitive suffixes and no "B".

var byteSuffixes = []struct {
	suffix string
	mult   uint64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// text returns a scalar's text whatever its style or tag, as Akash's custom decoders
// read it; null reads as "". what names the expected value in errors.
func (d *decoder) text(n *yaml.Node, what string) (string, *yaml.Node, error) {
	v, err := d.deref(n)
	if err != nil {
		return "", nil, err
	}
	if v.IsNull() {
		return "", v, nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", nil, d.errorf(n, "expected %s, found %s", what, describe(v))
	}
	return v.Value, v, nil
}

// millicpu reads CPU units: "100m" (millicores), or a number of CPUs ("0.5", "2").
func (d *decoder) millicpu(n *yaml.Node) (uint64, error) {
	s, v, err := d.text(n, "a CPU quantity")
	if err != nil || v.IsNull() {
		return 0, err
	}
	if m, ok := strings.CutSuffix(s, "m"); ok {
		u, err := strconv.ParseUint(m, 10, 32)
		if err != nil {
			return 0, d.errorf(n, "%q is not a CPU quantity: millicores must be a whole number (e.g. 500m)", s)
		}
		return u, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, d.errorf(n, "%q is not a CPU quantity (e.g. 0.5, 2 or 500m)", s)
	}
	f *= 1000
	switch {
	case f < 0:
		return 0, d.errorf(n, "%q: CPU units cannot be negative", s)
	case math.IsNaN(f) || f > math.MaxUint32:
		return 0, d.errorf(n, "%q: CPU units are out of range", s)
	}
	return uint64(uint32(f)), nil
}

// bytes reads a size: a number with an optional suffix (k, M, G, T, P, E: powers of
// 1000; Ki, Mi, Gi, Ti, Pi, Ei: powers of 1024). binaryOnly allows only the latter, as
// for GPU memory.
func (d *decoder) bytes(n *yaml.Node, binaryOnly bool) (uint64, error) {
	s, v, err := d.text(n, "a size")
	if err != nil || v.IsNull() {
		return 0, err
	}
	num, mult := s, uint64(1)
	for _, u := range byteSuffixes {
		if binaryOnly && !strings.HasSuffix(u.suffix, "i") {
			continue
		}
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = rest, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		units := "k, Ki, M, Mi, G, Gi, T, Ti, P, Pi, E or Ei"
		if binaryOnly {
			units = "Ki, Mi, Gi, Ti, Pi or Ei"
		}
		return 0, d.errorf(n, "%q is not a size: use a number with an optional suffix %s (case-sensitive, no \"B\"), e.g. 512Mi", s, units)
	}
	f *= float64(mult)
	switch {
	case f < 0:
		return 0, d.errorf(n, "%q: a size cannot be negative", s)
	case math.IsNaN(f) || f >= math.MaxUint64:
		return 0, d.errorf(n, "%q: the size is out of range", s)
	}
	return uint64(f), nil
}

// gpuUnits reads a whole number of GPUs.
func (d *decoder) gpuUnits(n *yaml.Node) (uint64, error) {
	s, v, err := d.text(n, "a number of GPUs")
	if err != nil || v.IsNull() {
		return 0, err
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, d.errorf(n, "%q is not a whole number of GPUs", s)
	}
	return u, nil
}

// binarySize renders a byte count in whole units of suffix, as Akash names GPU memory
// in attributes (80Gi).
func binarySize(b uint64, suffix string) string {
	for _, u := range byteSuffixes {
		if u.suffix == suffix {
			return fmt.Sprintf("%d%s", b/u.mult, suffix)
		}
	}
	return strconv.FormatUint(b, 10)
}
