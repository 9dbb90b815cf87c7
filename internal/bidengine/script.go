package bidengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"berth.dev/berth/api/market/v1"
)

// Script strategy limits and defaults.
const (
	DefaultScriptTimeout       = 10 * time.Second
	DefaultScriptMaxConcurrent = 8
	MaxScriptTimeout           = 5 * time.Minute
	MaxScriptConcurrent        = 256

	// maxScriptStdout bounds what is read as the price: a price is at most about 100
	// characters, so more than this is not a price.
	maxScriptStdout = 1 << 10
	// maxScriptStderr bounds the script's error output kept for the no-bid detail (its
	// last bytes: the error that ended a script is usually printed last).
	maxScriptStderr = 2 << 10
	// scriptWaitDelay is how long Wait waits, after the script was killed or exited, for
	// its output pipes to close (a process it started may still hold them).
	scriptWaitDelay = time.Second
)

// ScriptConfig configures the script strategy.
type ScriptConfig struct {
	// Path is the pricing script: a regular, executable file. A relative path is taken
	// from the working directory, never looked up in PATH.
	Path string
	// Timeout bounds one run of the script; zero means DefaultScriptTimeout.
	Timeout time.Duration
	// MaxConcurrent bounds how many runs are under way at once; zero means
	// DefaultScriptMaxConcurrent. Callers beyond it wait for a slot.
	MaxConcurrent int
}

func (c ScriptConfig) withDefaults() ScriptConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultScriptTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultScriptMaxConcurrent
	}
	return c
}

// Validate reports the first invalid field, named as in the configuration. It looks at
// the file Path names.
func (c ScriptConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Path == "":
		return errors.New("pricing.script.path: empty")
	case c.Timeout < 0 || c.Timeout > MaxScriptTimeout:
		return fmt.Errorf("pricing.script.timeout: %s is outside (0, %s]", c.Timeout, MaxScriptTimeout)
	case c.MaxConcurrent < 1 || c.MaxConcurrent > MaxScriptConcurrent:
		return fmt.Errorf("pricing.script.max_concurrent: %d is outside 1–%d", c.MaxConcurrent, MaxScriptConcurrent)
	}
	fi, err := os.Stat(c.Path)
	switch {
	case err != nil:
		return fmt.Errorf("pricing.script.path: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("pricing.script.path %s: not a regular file (%s)", c.Path, fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("pricing.script.path %s: not executable (mode %s)", c.Path, fi.Mode().Perm())
	}
	return nil
}

// ScriptPricer is the script strategy: for each decision it runs the operator's pricing
// script with the contract of Akash's provider, so scripts written for Akash work
// unchanged.
//
//   - stdin: one line of JSON describing the group (see scriptInput) with the order's
//     price and the precision the script should print (6 decimals);
//   - environment: the provider's own, plus AKASH_OWNER (the tenant) and AKASH_DENOM
//     (the order's denomination);
//   - stdout: the price per block for the whole group in that denomination, a plain
//     decimal (see ParseScriptPrice).
//
// A script that fails, times out or prints no price gives a *NoBid error. Each run has
// its own process group; when the script times out, is cancelled or fails, the whole
// group is killed, so no process it started outlives that decision. After a success,
// processes it left in the background (say, refreshing a cache) are left alone, as
// Akash does. It is safe for concurrent use.
type ScriptPricer struct {
	path    string
	timeout time.Duration
	// slots is a semaphore: a run holds one element while its script runs.
	slots chan struct{}
}

var _ Pricer = (*ScriptPricer)(nil)

// NewScriptPricer validates cfg and returns the strategy. It starts nothing.
func NewScriptPricer(cfg ScriptConfig) (*ScriptPricer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// An absolute path: exec looks a name without a slash up in PATH, and the file
	// Validate looked at is the one that must run.
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("pricing.script.path: %w", err)
	}
	return &ScriptPricer{path: path, timeout: cfg.Timeout, slots: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// Price runs the script for r and checks its price against the order's (CheckPrice).
// It waits for a free slot first. A *NoBid error is a decision; an error wrapping
// ctx.Err() means the caller's ctx ended before there was one.
func (p *ScriptPricer) Price(ctx context.Context, r Request) (market.DecCoin, error) {
	in, err := scriptInput(r)
	if err != nil {
		return market.DecCoin{}, fmt.Errorf("pricing script input: %w", err)
	}
	if err := p.acquire(ctx); err != nil {
		return market.DecCoin{}, fmt.Errorf("pricing script %s: waiting for a free slot: %w", p.path, err)
	}
	defer func() { <-p.slots }()
	out, err := p.run(ctx, r, in)
	if err != nil {
		return market.DecCoin{}, err
	}
	amount, err := ParseScriptPrice(out)
	if err != nil {
		return market.DecCoin{}, noBid(ReasonScriptOutput, "pricing script %s: %v", p.path, err)
	}
	price := market.DecCoin{Amount: amount, Denom: r.MaxPrice.Denom}
	return price, CheckPrice(price, r.MaxPrice)
}

func (p *ScriptPricer) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // a free slot must not win over an ended ctx
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs the script once and returns what it printed, at most maxScriptStdout bytes.
func (p *ScriptPricer) run(ctx context.Context, r Request, in []byte) ([]byte, error) {
	runCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	//nolint:gosec // G204: the path is the operator's configured pricing script, validated at start.
	cmd := exec.CommandContext(runCtx, p.path)
	// Appended variables override inherited ones of the same name (exec keeps the last).
	cmd.Env = append(cmd.Environ(), "AKASH_OWNER="+r.Owner, "AKASH_DENOM="+r.MaxPrice.Denom)
	cmd.Stdin = bytes.NewReader(in)
	stdout := &boundedBuffer{limit: maxScriptStdout}
	stderr := &boundedBuffer{limit: maxScriptStderr, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = scriptWaitDelay

	err := cmd.Run()
	if err == nil {
		if stdout.dropped {
			return nil, noBid(ReasonScriptOutput, "pricing script %s printed more than %d bytes", p.path, maxScriptStdout)
		}
		return stdout.buf, nil
	}
	if cmd.Process != nil {
		// The script failed: kill what it left behind (a process holding its output
		// open, or one started in the background). The group outlives the reaped
		// script only while such a process is in it; else the kill finds no group.
		_ = killGroup(cmd.Process.Pid)
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("pricing script %s: %w", p.path, ctx.Err())
	case runCtx.Err() != nil:
		return nil, noBid(ReasonScriptFailed, "pricing script %s did not finish within %s%s", p.path, p.timeout, stderr.detail())
	case errors.Is(err, exec.ErrWaitDelay):
		return nil, noBid(ReasonScriptFailed, "pricing script %s exited, but a process it started kept its output open%s", p.path, stderr.detail())
	case errors.As(err, &exitErr):
		return nil, noBid(ReasonScriptFailed, "pricing script %s failed: %s%s", p.path, exitErr.ProcessState, stderr.detail())
	}
	return nil, noBid(ReasonScriptFailed, "pricing script %s could not be started: %v", p.path, err)
}

// killGroup SIGKILLs the process group pgid; a group that is gone is not an error.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return os.ErrProcessDone
	case err != nil:
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}

// maxPriceChars is more than the text of any Dec (a sign, 77 digits, a point and 18
// decimals), so longer output is not a price and is not quoted back in full.
const maxPriceChars = 128

// ParseScriptPrice reads a pricing script's output: a decimal, with surrounding white
// space ignored. It accepts what Cosmos SDK's LegacyNewDecFromStr (which Akash uses)
// accepts: "12", "0.000123", "-1.5", at most 18 decimal places; no exponent ("1e3"),
// no leading or trailing point (".5", "5."). It is stricter than Cosmos SDK on signs:
// at most one "+" or "-" and only before the digits (the SDK takes "+.5" and "--5").
// Zero and negative numbers parse: whether a price can be bid is CheckPrice's question.
func ParseScriptPrice(out []byte) (market.Dec, error) {
	s := strings.TrimSpace(string(out))
	switch {
	case s == "":
		return market.Dec{}, errors.New("printed no price")
	case len(s) > maxPriceChars:
		return market.Dec{}, fmt.Errorf("printed %d characters, longer than any price", len(s))
	}
	d, err := market.ParseDec(s)
	if err != nil {
		return market.Dec{}, fmt.Errorf("printed no price: %w", err)
	}
	return d, nil
}

// boundedBuffer keeps at most limit bytes of what is written to it: the first ones, or
// the last ones with keepTail. Writes never fail, so a chatty script is not stopped by a
// broken pipe, which would change how it exits.
type boundedBuffer struct {
	limit    int
	keepTail bool
	buf      []byte
	dropped  bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	switch {
	case !b.keepTail:
		if room := b.limit - len(b.buf); len(p) > room {
			p, b.dropped = p[:room], true
		}
		b.buf = append(b.buf, p...)
	case len(p) >= b.limit:
		b.buf, b.dropped = append(b.buf[:0], p[len(p)-b.limit:]...), true
	default:
		b.buf = append(b.buf, p...)
		if over := len(b.buf) - b.limit; over > 0 {
			b.buf, b.dropped = b.buf[:copy(b.buf, b.buf[over:])], true
		}
	}
	return n, nil
}

// detail is the kept error output for a no-bid detail: "" or `; stderr: "…"`.
func (b *boundedBuffer) detail() string {
	s := strings.TrimSpace(string(b.buf))
	if s == "" {
		return ""
	}
	if b.dropped {
		s = "…" + s
	}
	return fmt.Sprintf("; stderr: %q", s)
}

// ScriptPricePrecision is the price_precision sent to scripts: the number of decimals
// the script should print, as Akash's provider sends it (DefaultPricePrecision).
const ScriptPricePrecision = 6

// scriptInput is the JSON the script reads on stdin, field for field what Akash's
// provider sends, followed by a newline:
//
//	{"resources":[{"memory":8589934592,"cpu":2000,
//	  "gpu":{"units":2,"attributes":{"vendor":{"nvidia":{"model":"a100","ram":"80Gi"}}}},
//	  "storage":[{"class":"ephemeral","size":1073741824}],
//	  "count":3,"endpoint_quantity":3,"ip_lease_quantity":1}],
//	 "price":{"denom":"uakt","amount":"300000.000000000000000000"},"price_precision":6}
//
// cpu is in millicores, memory and sizes in bytes, all per replica; count is the number
// of replicas. endpoint_quantity counts every endpoint of a replica, leased-IP ones
// included; ip_lease_quantity the leased-IP ones. price is the order's: the most the
// tenant pays per block for the whole group.
//
// gpu.attributes is {} without GPUs. With GPUs it holds one vendor and one model, the
// reserved one (an order's "*" is resolved to the node's model), with "ram" and
// "interface" only when the order's entry for that model asked for them (Unit.GPUAsked),
// never the node's own: Akash's provider rewrites a reservation's GPU attributes to
// "vendor/<v>/model/<node's model>[/ram/<order's>][/interface/<order's>]" and sends
// those, and scripts key their GPU prices on exactly these fields.
func scriptInput(r Request) ([]byte, error) {
	in := scriptRequest{
		Resources:      make([]scriptResource, 0, len(r.Units)),
		Price:          scriptCoin{Denom: r.MaxPrice.Denom, Amount: r.MaxPrice.Amount},
		PricePrecision: ScriptPricePrecision,
	}
	for i := range r.Units {
		u := &r.Units[i]
		res := scriptResource{
			Memory:           u.MemoryBytes,
			CPU:              u.CPUMillis,
			GPU:              scriptGPU{Units: u.GPUs},
			Storage:          make([]scriptStorage, 0, len(u.Storage)),
			Count:            u.Count,
			EndpointQuantity: u.Endpoints + u.IPEndpoints,
			IPLeaseQuantity:  u.LeasedIPs,
		}
		if u.GPUs > 0 {
			vendor := strings.ToLower(u.GPU.Vendor)
			if vendor == "" {
				vendor = "nvidia"
			}
			res.GPU.Attributes.Vendor = map[string]scriptGPUModel{
				vendor: {Model: u.GPU.Model, RAM: u.GPUAsked.RAM, Interface: u.GPUAsked.Interface},
			}
		}
		for _, st := range u.Storage {
			res.Storage = append(res.Storage, scriptStorage{Class: st.Class, Size: st.Bytes})
		}
		in.Resources = append(in.Resources, res)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// The wire types of scriptInput, in Akash's field order. They are this contract's
// own, so a change to Request cannot change what scripts read.
type (
	scriptRequest struct {
		Resources      []scriptResource `json:"resources"`
		Price          scriptCoin       `json:"price"`
		PricePrecision int              `json:"price_precision"`
	}
	scriptCoin struct {
		Denom  string     `json:"denom,omitempty"`
		Amount market.Dec `json:"amount"`
	}
	scriptResource struct {
		Memory           uint64          `json:"memory"`
		CPU              uint64          `json:"cpu"`
		GPU              scriptGPU       `json:"gpu"`
		Storage          []scriptStorage `json:"storage"`
		Count            uint32          `json:"count"`
		EndpointQuantity uint32          `json:"endpoint_quantity"`
		IPLeaseQuantity  uint32          `json:"ip_lease_quantity"`
	}
	scriptGPU struct {
		Units      uint32 `json:"units"`
		Attributes struct {
			Vendor map[string]scriptGPUModel `json:"vendor,omitempty"`
		} `json:"attributes"`
	}
	scriptGPUModel struct {
		Model     string `json:"model"`
		RAM       string `json:"ram,omitempty"`
		Interface string `json:"interface,omitempty"`
	}
	scriptStorage struct {
		Class string `json:"class"`
		Size  uint64 `json:"size"`
	}
)
